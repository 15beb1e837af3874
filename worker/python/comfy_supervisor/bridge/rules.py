"""The crossing rules: what of ComfyUI the bridge moves, and how, given to it by
comfy_supervisor.crossing, which names ComfyUI's modules so that the bridge need not.

Empty until install() fills them, which crossing.install() does once per process before
any session starts (the host's install, a pack's worker's start): a conversation refuses
to start before that (check_installed), so that no process moves ComfyUI's objects as
mere handles for want of its rules.

A registry rather than arguments: the rules are read deep in the bridge (a value's
encoder and decoder, a proxy's class, a served use, a mirror's recipe), often in
functions that no session reaches, and they are one per process and never change once
set, as the ComfyUI checkout they describe does not. The bridge cannot import them
(crossing imports the bridge), so crossing hands them over here; modules of the bridge
read them as `rules.kinds`, never bind them at import.
"""

# Each is what the bridge has before install(): no object of ComfyUI crosses.
kinds = ()                 # object_kinds.Kind of each remote object, the first that matches wins
by_name = {}               # a kind's name -> the kind
mirrors = {}               # a kind's name -> the attributes read as a mirror (bridge/mirror.py)
mirror_recipes = None      # how a mirrored module is described and built: recipe_of(owner, kind, name,
                           # module), well_formed(recipe), mirrored_class(path), operations(recipe, dtype)
functions = frozenset()    # upstream's functions one side calls for the other, by module and name
by_value = {}              # a class that crosses as a copy -> (its module, the fields its constructor takes)
upstream_modules = ()      # the checkout's top-level modules: their enums cross by name, a path walks their objects
loaded_by_path = ()        # packages whose modules upstream loads under their file's path too
errors = None              # upstream's errors that cross as themselves: interrupt(set_flag),
                           # is_interrupt(error), oom_type()
installed = False


def install(*, kinds, mirrors, mirror_recipes, functions, by_value, upstream_modules, loaded_by_path, errors):
    """Sets this process's rules (crossing.install()), each as the comments above say."""
    globals().update(kinds=tuple(kinds), by_name={kind.name: kind for kind in kinds}, mirrors=dict(mirrors),
                     mirror_recipes=mirror_recipes, functions=frozenset(functions), by_value=dict(by_value),
                     upstream_modules=tuple(upstream_modules), loaded_by_path=tuple(loaded_by_path), errors=errors,
                     installed=True)


def check_installed():
    """Raises, in one line, where this process installed no rules."""
    if not installed:
        raise RuntimeError("comfy_supervisor's crossing rules are not installed in this process: call "
                           "comfy_supervisor.crossing.install() before any session with a peer starts")
