"""Which objects cross between the host and a pack as remote objects, and what a pack may
do with the host's (docs/PACKS.md, "Remote objects"): how the kinds of the rules
(bridge/rules.py, listed in comfy_supervisor.crossing.kinds) are applied.

An object of a kind stays with its owner; the other side gets a proxy whose attribute
reads, writes and method calls run on the owner's side. A kind lists what a pack's worker
may do with a host object of that kind: anything else is refused, in one line, before it
runs. What the host does with a pack's objects is not listed: the host is ComfyUI itself,
and what a pack's object answers is checked as any value from a pack is.

Each kind names the upstream class its objects are, by module and name. The class is
looked up only in modules already imported, so naming one never imports ComfyUI; a
proxy is an instance of a subclass of the receiver's own class of that name, so that
ComfyUI's isinstance checks pass.

The first matching kind wins, so a more specific class comes before its base. An object
of no kind is a CALLABLE when it can be called, and otherwise crosses as a handle that
only its maker resolves (bridge/values.py). What of the host's crosses to a pack is
narrower, and decided once, in kind_for_pack (docs/SECURITY.md, "What a pack can reach of
the host's objects").
"""

import importlib
import inspect
import os
import re
import sys
import types

from . import rules


class Kind:
    """A kind of remote object: its upstream class, and what a pack may do with the host's."""

    def __init__(self, name, module, cls, calls=(), reads=(), writes=(), paths=None, here=None):
        self.name = name
        self.module = module
        self.cls = cls
        self.calls = frozenset(calls)
        self.reads = frozenset(reads)
        self.writes = frozenset(writes)
        self.paths = dict(paths or {})  # a listed call -> its AttributePath argument
        # A listed call a proxy answers on its receiver's side where it can: name ->
        # fn(proxy, at_owner, *args), at_owner the call made at the owner.
        self.here = dict(here or {})

    def upstream_class(self, importing=False):
        """The class, where its module is imported (`importing`: imported now, for a proxy
        of the kind received); None otherwise."""
        found = self.upstream_classes()
        if found or not (importing and self.module.partition(".")[0] in rules.upstream_modules):
            return found[0] if found else None
        try:
            return _class_in(importlib.import_module(self.module), self.cls)
        except Exception:  # noqa: BLE001 (a ComfyUI that lacks it: the proxy is of object)
            return None

    def upstream_classes(self):
        """The class in each copy of its module this process holds: upstream loads the
        modules of some packages (rules.loaded_by_path) under their file's path too, so the
        class of upstream's own nodes' objects may be another than that of an import by name."""
        found = [_class_in(module, self.cls) for module in (sys.modules.get(self.module), _loaded_by_path(self.module))]
        return [cls for cls in found if cls is not None]

    def allows(self, do, name):
        """Whether a pack may `do` ("call", "get", "set") `name` on a host object of this kind."""
        return name in {"call": self.calls, "get": self.reads, "set": self.writes}.get(do, ())


class AttributePath:
    """An argument of a listed call that upstream resolves as a dotted attribute path at the
    owner (upstream's get_attr, set_attr): walked from the object's `root` attribute.
    `patches`: the object's dict of such paths to what upstream sets there later
    (ModelPatcher.object_patches), where the call adds one."""

    def __init__(self, argument, root, patches=None):
        self.argument = argument
        self.root = root
        self.patches = patches


# A function or callable object one side hands the other (a pack's attention patch, a CFG
# function, a host callback): the other side may call it, and nothing else.
CALLABLE = Kind("CALLABLE", "builtins", "object", calls=("__call__",))

def kind_of(value):
    """The kind `value` crosses as, or None for a value that crosses as a handle."""
    kind = listed_kind_of(value)
    if kind is None and callable(value) and not isinstance(value, type) and not _is_module(value):
        return CALLABLE
    return kind


def listed_kind_of(value):
    """The kind, of the rules' kinds, that `value` is an object of; None for none."""
    for kind in rules.kinds:
        if any(isinstance(value, cls) for cls in kind.upstream_classes()):
            return kind
    return None


class Withheld(Exception):
    """The host's object may not cross to a pack; the message says what it is, in one line."""


# Libraries whose functions are general-purpose (they open files, run processes, import):
# never one written to be handed to a patch, whatever held it. (The standard library's
# names are Python 3.10's list; before it, the few that import and load stand for it.)
_GENERAL_PURPOSE = frozenset(getattr(sys, "stdlib_module_names", ("importlib", "runpy", "pickle", "subprocess",
                                                                  "os", "shutil", "code"))) | {"builtins", "torch"}


def kind_for_pack(value):
    """The kind the host's `value` crosses to a pack as (None: no remote object, it crosses
    as a value or not at all), or Withheld. A callable crosses only where the host hands
    it out on purpose: an object of a listed kind, whose uses are listed; a bound method
    of one by a name its kind lists; a function written in Python, or an object whose
    __call__ is one (a patch, a closure, upstream's wrapper executor), as ComfyUI's code
    puts them in model_options and in a patch's arguments. So builtins (eval, getattr),
    bound methods of any other object, classes and modules, and the standard library's
    and torch's own functions never do; frames and code objects are no values at all."""
    kind = listed_kind_of(value)
    if kind is not None or not (callable(value) or isinstance(value, types.ModuleType)) or _is_module(value):
        return kind
    if isinstance(value, (type, types.ModuleType)):
        raise Withheld(f"a {'class' if isinstance(value, type) else 'module'} ({_name_of(value)})")
    if isinstance(value, types.MethodType):
        owner = listed_kind_of(value.__self__)
        if owner is not None and owner.allows("call", value.__name__):
            return CALLABLE
        raise Withheld(f"a bound method {_name_of(value)} (of no object whose kind lists it)")
    if isinstance(value, types.FunctionType):
        function, where = value, value.__module__
    else:
        function = inspect.getattr_static(type(value), "__call__", None)
        where = type(value).__module__
    if not isinstance(function, types.FunctionType):
        raise Withheld(f"a builtin callable ({_name_of(value)})")
    if str(where).partition(".")[0] in _GENERAL_PURPOSE:
        raise Withheld(f"a function of a general-purpose library ({_name_of(value)})")
    return CALLABLE


def _name_of(value):
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    module = getattr(value, "__module__", None) or type(value).__module__
    return f"{module}.{name}"[:120] if isinstance(module, str) and isinstance(name, str) else type(value).__name__


_PUBLIC_SEGMENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*|[0-9]+")
MAX_PATH_SEGMENTS = 32
MAX_PATH_CHARS = 400


def path_segments(path):
    """The segments of a dotted attribute path a pack sent, each a public name or an index
    (diffusion_model.input_blocks.0.0); None for anything else: a dunder or private
    segment, an empty one, a non-ASCII name, a path too long."""
    if not isinstance(path, str) or not 0 < len(path) <= MAX_PATH_CHARS:
        return None
    segments = path.split(".")
    if len(segments) > MAX_PATH_SEGMENTS or not all(_PUBLIC_SEGMENT.fullmatch(s) for s in segments):
        return None
    return segments


def walkable(value):
    """Whether a pack's attribute path may pass through `value` at the host: an instance of
    a class of ComfyUI's own or a torch module (a model's parts). Never a class, a module,
    a function or method, a frame or any other object, whose public names reach further
    than the model (a module's globals, a class's functions, a frame's f_globals)."""
    if isinstance(value, (type, types.ModuleType)) or callable(value) and not _is_module(value):
        return False
    return _is_module(value) or type(value).__module__.partition(".")[0] in rules.upstream_modules


def _class_in(module, name):
    found = getattr(module, name, None) if module is not None else None
    return found if isinstance(found, type) else None


_by_path = {}  # such a module's name -> (how many modules were loaded when looked for, the module)


def _loaded_by_path(name):
    """The module `name` of a package of rules.loaded_by_path as upstream loaded it: under
    its file's path without ".py". Looked for again only once more modules were loaded."""
    package, dot, _ = name.partition(".")
    if not dot or package not in rules.loaded_by_path:
        return None
    count, module = _by_path.get(name, (-1, None))
    if module is None and count != len(sys.modules):
        tail = os.sep + os.path.join(*name.split("."))
        module = next((found for key, found in list(sys.modules.items()) if key.endswith(tail)), None)
        _by_path[name] = (len(sys.modules), module)
    return module


def _is_module(value):
    """A torch module is called for its forward, but it is a model a pack made (a detector,
    an upscaler): it stays with its maker as a handle, as any such object does."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.nn.Module)
