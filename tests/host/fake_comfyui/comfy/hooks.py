"""Our model of upstream's comfy/hooks.py, as far as a CONDITIONING carries it: a HookGroup
(its hooks, clone, clone_and_combine, set_keyframes_on_hooks) that nodes put under a
conditioning's "hooks" key. What upstream's sampler does with hooks (weights patched per
conditioning while it samples) is not modelled: here a HookGroup only travels with the
conditioning."""

import enum


class EnumHookMode(enum.Enum):
    MinVram = "minvram"
    MaxSpeed = "maxspeed"


class Hook:
    def __init__(self, hook_type="weight", strength=1.0):
        self.hook_type = hook_type
        self.strength = strength
        self.hook_keyframe = None

    def clone(self):
        c = Hook(self.hook_type, self.strength)
        c.hook_keyframe = self.hook_keyframe
        return c


class HookGroup:
    def __init__(self):
        self.hooks = []

    def add(self, hook):
        if hook not in self.hooks:
            self.hooks.append(hook)

    def clone(self):
        c = HookGroup()
        for hook in self.hooks:
            c.add(hook.clone())
        return c

    def clone_and_combine(self, other):
        c = self.clone()
        if other is not None:
            for hook in other.hooks:
                c.add(hook.clone())
        return c

    def set_keyframes_on_hooks(self, hook_kf):
        for hook in self.hooks:
            hook.hook_keyframe = hook_kf
