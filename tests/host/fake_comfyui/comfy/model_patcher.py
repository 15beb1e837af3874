"""Our model of upstream's comfy/model_patcher.py, as far as packs use a MODEL: ModelPatcher's
clone (a deep copy of model_options, a shallow copy of the object patches), its object
patches and get_model_object, the patch setters that write into
model_options["transformer_options"], the sampler functions, and weight patches. Names,
signatures and where things are kept follow upstream's. What the memory manager reads of
a model is model_management's ModelPatcher, which this one extends: its weights' bytes are
charged to the simulated device when loaded, while its torch module computes on the CPU."""

import contextlib
import copy
import uuid

import comfy.hooks
import comfy.model_management
import comfy.utils


def set_model_options_patch_replace(model_options, patch, name, block_name, number, transformer_index=None):
    to = model_options["transformer_options"].copy()
    if "patches_replace" not in to:
        to["patches_replace"] = {}
    else:
        to["patches_replace"] = to["patches_replace"].copy()
    if name not in to["patches_replace"]:
        to["patches_replace"][name] = {}
    else:
        to["patches_replace"][name] = to["patches_replace"][name].copy()
    block = (block_name, number) if transformer_index is None else (block_name, number, transformer_index)
    to["patches_replace"][name][block] = patch
    model_options["transformer_options"] = to
    return model_options


def _bytes_of(model):
    return sum(t.numel() * t.element_size() for t in model.state_dict().values())


class ModelPatcher(comfy.model_management.ModelPatcher):
    def __init__(self, model, load_device, offload_device, size=0, weight_inplace_update=False):
        super().__init__(size or _bytes_of(model), load_device, offload_device)
        self.model = model
        self.patches = {}
        self.patches_uuid = uuid.uuid4()
        self.backup = {}
        self.object_patches = {}
        self.object_patches_backup = {}
        self.model_options = {"transformer_options": {}}
        self.weight_inplace_update = weight_inplace_update
        self.callbacks = {}
        self.forced_hooks = None
        self.hook_mode = comfy.hooks.EnumHookMode.MaxSpeed

    def clone(self):
        n = self.__class__(self.model, self.load_device, self.offload_device, self.size,
                           weight_inplace_update=self.weight_inplace_update)
        n.patches = {k: v[:] for k, v in self.patches.items()}
        n.patches_uuid = self.patches_uuid
        n.backup = self.backup  # as upstream's: the clones patch one model's weights in turn
        n.object_patches = self.object_patches.copy()
        n.model_options = copy.deepcopy(self.model_options)
        n.parent = self
        n.hook_mode = self.hook_mode
        return n

    def is_clone(self, other):
        return hasattr(other, "model") and self.model is other.model

    def set_model_sampler_cfg_function(self, sampler_cfg_function, disable_cfg1_optimization=False):
        self.model_options["sampler_cfg_function"] = sampler_cfg_function
        if disable_cfg1_optimization:
            self.model_options["disable_cfg1_optimization"] = True

    def set_model_sampler_post_cfg_function(self, post_cfg_function, disable_cfg1_optimization=False):
        self.model_options["sampler_post_cfg_function"] = \
            self.model_options.get("sampler_post_cfg_function", []) + [post_cfg_function]
        if disable_cfg1_optimization:
            self.model_options["disable_cfg1_optimization"] = True

    def set_model_patch(self, patch, name):
        to = self.model_options["transformer_options"]
        if "patches" not in to:
            to["patches"] = {}
        to["patches"][name] = to["patches"].get(name, []) + [patch]

    def set_model_patch_replace(self, patch, name, block_name, number, transformer_index=None):
        self.model_options = set_model_options_patch_replace(self.model_options, patch, name, block_name, number,
                                                             transformer_index=transformer_index)

    def set_model_attn1_patch(self, patch):
        self.set_model_patch(patch, "attn1_patch")

    def set_model_attn2_patch(self, patch):
        self.set_model_patch(patch, "attn2_patch")

    def set_model_attn2_replace(self, patch, block_name, number, transformer_index=None):
        self.set_model_patch_replace(patch, "attn2", block_name, number, transformer_index)

    def set_model_attn2_output_patch(self, patch):
        self.set_model_patch(patch, "attn2_output_patch")

    def add_object_patch(self, name, obj):
        self.object_patches[name] = obj

    def get_model_object(self, name):
        if name in self.object_patches:
            return self.object_patches[name]
        if name in self.object_patches_backup:
            return self.object_patches_backup[name]
        return comfy.utils.get_attr(self.model, name)

    def model_patches_models(self):
        """The models the patches bring (upstream asks each patch for its models())."""
        to = self.model_options["transformer_options"]
        models = []
        for patch_list in to.get("patches", {}).values():
            models += [model for p in patch_list if hasattr(p, "models") for model in p.models()]
        for patch_map in to.get("patches_replace", {}).values():
            models += [model for p in patch_map.values() if hasattr(p, "models") for model in p.models()]
        return models

    def model_dtype(self):
        if hasattr(self.model, "get_dtype"):
            return self.model.get_dtype()

    def model_state_dict(self, filter_prefix=None):
        return {key: value for key, value in self.model.state_dict().items()
                if filter_prefix is None or key.startswith(filter_prefix)}

    def add_patches(self, patches, strength_patch=1.0, strength_model=1.0):
        """Upstream's form of a weight patch: (strength_patch, value, strength_model, offset,
        function)."""
        model_sd = self.model_state_dict()
        added = set()
        for key in patches:
            if key in model_sd:
                added.add(key)
                self.patches[key] = self.patches.get(key, []) + [(strength_patch, patches[key], strength_model, None,
                                                                  None)]
        self.patches_uuid = uuid.uuid4()
        return list(added)

    def get_key_patches(self, filter_prefix=None):
        return {key: [value] + self.patches.get(key, []) for key, value in self.model_state_dict(filter_prefix).items()}

    def get_all_callbacks(self, call_type):
        return [c for group in self.callbacks.get(call_type, {}).values() for c in group]

    def apply_hooks(self, hooks, transformer_options=None, force_apply=False):
        return transformer_options or {}

    @contextlib.contextmanager
    def use_ejected(self, skip_and_inject_on_exit_only=False):
        yield

    def patch_model(self, device_to=None, lowvram_model_memory=0, load_weights=True, force_patch_weights=False):
        """As upstream's: the object patches set on the model, then its weights loaded with
        their patches (load)."""
        for name, obj in self.object_patches.items():
            previous = comfy.utils.set_attr(self.model, name, obj)
            self.object_patches_backup.setdefault(name, previous)
        if load_weights:
            self.load(device_to, lowvram_model_memory=lowvram_model_memory, force_patch_weights=force_patch_weights)
        return self.model

    def load(self, device_to=None, lowvram_model_memory=0, force_patch_weights=False, full_load=False):
        """The weight patches added to the model's weights (as upstream's "diff" patches,
        strength-scaled), undone by unpatch_model; as upstream's, the weights keep a clone's
        patches until another clone with other patches loads (model_management's load,
        through partially_load, as upstream's)."""
        if getattr(self.model, "current_weight_patches_uuid", None) == self.patches_uuid:
            return  # these patches are on the weights already
        self._restore_weights()
        weights = self.model_state_dict()
        for key, patch_list in self.patches.items():
            weight = weights[key]
            self.backup.setdefault(key, weight.clone())
            for strength_patch, value, strength_model, _, _ in patch_list:
                if isinstance(value, tuple) and value[0] == "diff":  # upstream's form of a diff patch
                    value = value[1][0]
                elif hasattr(value, "weights"):  # an adapter (comfy/weight_adapter/)
                    value = value.weights[0]
                weight.mul_(strength_model).add_(value * strength_patch)
        self.model.current_weight_patches_uuid = self.patches_uuid

    def partially_load(self, device, extra_memory, force_patch_weights=False):
        self.load(device, force_patch_weights=force_patch_weights)
        return super().partially_load(device, extra_memory, force_patch_weights=force_patch_weights)

    def detach(self, unpatch_all=True):
        super().detach(unpatch_all)
        if unpatch_all:
            self._restore_weights()

    def _restore_weights(self):
        weights = self.model_state_dict()
        for key, saved in self.backup.items():
            weights[key].copy_(saved)
        self.backup.clear()
        self.model.current_weight_patches_uuid = None

    def unpatch_model(self, device_to=None, unpatch_weights=True):
        if unpatch_weights:
            self._restore_weights()
        for name, saved in self.object_patches_backup.items():
            comfy.utils.set_attr(self.model, name, saved)
        self.object_patches_backup.clear()
