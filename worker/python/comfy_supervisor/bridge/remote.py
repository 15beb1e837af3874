"""Remote objects: an object stays with its owner, and the other side holds a proxy whose
attribute reads, writes and calls run on the owner's side (docs/PACKS.md, "Remote objects").

On the wire an object of the sender's is {"$": "remote", "id", "kind", "type"}, and one
of the receiver's, going back, {"$": "own", "id"} (bridge/values.py encodes both). The
owner keeps what it handed over in its Exports, by id: the peer can name only those ids,
and an id it was never given, or one it let go, is an error and nothing else.

A use of a proxy is one request to the owner, answered before anything else happens on
that side of the conversation (bridge/session.py): {"op": "invoke", "call", "id", "do",
"name", "args", "kwargs" | "value"} with "do" one of "get", "set", "call", answered by
{"op": "invoked", "call", "value"} or {"op": "invoked", "call", "error", "type", ...}.
The owner serves it as ComfyUI would run it in one process, on the thread that waits in
the same conversation, so a pack's function the host's sampler calls, which calls the
host's model again, nests as it would in one process.

A proxy is an instance of a subclass of the receiver's own upstream class of its kind
(bridge/object_kinds.py), so ComfyUI's isinstance checks pass. It is never pickled, and a
copy of it is itself: what it stands for does not change by being copied. Once its
owner's life ended, any use raises one line naming the owner and the object.

What the host serves a pack is closed by construction (docs/SECURITY.md, "What a pack can
reach of the host's objects"): a use its kind lists, a path argument only of public names
through ComfyUI's own objects, and a callable back only where kind_for_pack hands it out.
Each refusal is one line to the pack and one line in the host's log, naming the pack.
"""

import functools
import inspect
import itertools
import logging
import sys
import threading
import time
import types
import weakref

from . import rules, written_back
from .object_kinds import CALLABLE, Withheld, kind_for_pack, kind_of, path_segments, walkable

log = logging.getLogger("comfy_supervisor")
# A pack that is refused in a loop gets one line in the log per this many seconds, the
# refusals in between counted in the next.
REFUSAL_LOG_INTERVAL_S = 10.0


class RemoteError(RuntimeError):
    """A remote object cannot be used, or a peer asked for one it cannot have; one line."""


def one_line(error):
    """`error`'s type and the first line of its message."""
    return f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"


# Attributes a proxy answers itself: its own link, and what Python asks of any object.
_LOCAL = frozenset(("_remote", "__class__", "__dict__", "__deepcopy__", "__copy__", "__reduce__",
                    "__reduce_ex__", "__repr__", "__getattribute__", "__setattr__", "__init_subclass__"))


class Exports:
    """Our objects the peer holds, by id. The same object keeps its id while it is held,
    so that it comes back as itself. Each time an object is sent counts: the peer lets go
    with how many it received, so an object sent again while its release was on the way
    stays (the release counts fewer than were sent)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._objects = {}   # id -> [object, kind, times sent]
        self._ids = {}       # id(object) -> id
        self._next = itertools.count(1)

    def export(self, value, kind):
        with self._lock:
            known = self._ids.get(id(value))
            if known is not None and self._objects[known][0] is value:
                self._objects[known][2] += 1
                return known
            number = next(self._next)
            self._objects[number] = [value, kind, 1]
            self._ids[id(value)] = number
            return number

    def get(self, number):
        """The object and its kind; RemoteError for an id the peer was never given or let go."""
        with self._lock:
            found = self._objects.get(number) if type(number) is int else None
        if found is None:
            raise RemoteError(f"no object {str(number)[:20]} was handed over here, or it was let go")
        return found[0], found[1]

    def release(self, receipts):
        """The peer let go of each [id, times it received it]. What is dropped is dropped
        after the lock: an object's finalizer may use the peer's objects, whose uses the
        peer may answer with uses of ours (upstream's ModelPatcher.__del__ moves its
        patches, a pack's functions among them)."""
        dropped = []
        with self._lock:
            for receipt in receipts:
                number, count = receipt if isinstance(receipt, list) and len(receipt) == 2 else (None, None)
                found = self._objects.get(number) if type(number) is int and type(count) is int else None
                if found is None:
                    continue
                found[2] -= count
                if found[2] <= 0:
                    dropped.append(self._objects.pop(number))
                    self._ids.pop(id(found[0]), None)
            found = None
        dropped.clear()

    def clear(self):
        with self._lock:
            dropped = list(self._objects.values())
            self._objects.clear()
            self._ids.clear()
        dropped.clear()

    def __len__(self):
        return len(self._objects)


class Link:
    """What a proxy knows: the session that reaches its owner, the object's id there, its
    kind and type, and whose it is, for messages ("the host", "pack impact")."""

    def __init__(self, session, number, kind, type_name, owner):
        self.session = session
        self.id = number
        self.kind = kind
        self.type_name = type_name
        self.owner = owner
        self.signature = None  # inspect.signature of the object at its owner, once read

    def describe(self):
        return f"{self.owner}'s {self.kind.name} ({self.type_name.rpartition('.')[2]})"

    def invoke(self, do, name, args=(), kwargs=None, value=None):
        return self.session.invoke(self, do, name, list(args), dict(kwargs or {}), value)


class RemoteMethod:
    """A method of a remote object, called on its owner's side. It holds the proxy: the
    object stays the peer's to use while its method may still be called
    (`model.get_model_object("x").method(...)` drops the proxy before the call)."""

    def __init__(self, link, name, proxy):
        self._link, self._name, self._proxy = link, name, proxy

    def __call__(self, *args, **kwargs):
        return self._link.invoke("call", self._name, args, kwargs)

    def __repr__(self):
        return f"<remote method {self._name} of {self._link.describe()}>"


def _getattribute(proxy, name):
    if name in _LOCAL:
        return object.__getattribute__(proxy, name)
    link = object.__getattribute__(proxy, "_remote")
    if name == "__signature__":
        return _signature(link)
    if name.startswith("__") and name.endswith("__"):
        return object.__getattribute__(proxy, name)
    # What torch keeps of a module (its parameters, buffers, submodules, hooks) is the
    # proxy's own and empty: to torch's traversal (state_dict, a parent's patching) a
    # remote module holds nothing here, which is true.
    local = object.__getattribute__(proxy, "__dict__")
    if name in local:
        return local[name]
    # The torch module itself, over the owner's weights (bridge/mirror.py).
    if name in rules.mirrors.get(link.kind.name, ()):
        return link.session.session.mirrors.get(link, name)
    if name in link.kind.here:
        return functools.partial(link.kind.here[name], proxy, RemoteMethod(link, name, proxy))
    # A method of the upstream class is called on the owner's side without asking first.
    if isinstance(inspect.getattr_static(type(proxy).__mro__[1], name, None), types.FunctionType):
        return RemoteMethod(link, name, proxy)
    # Anything else is read at the owner: a method the receiver's class lacks (one of a
    # mixin, as upstream's EPS of a model's sampling object) comes as a remote callable.
    value = link.invoke("get", name)
    if not link.kind.allows("set", name):
        return value
    # A dict or list the other side may set back: its changes in place are (written_back.py).
    root = written_back.Root(lambda whole: _setattr(proxy, name, whole), f"{name} of {link.describe()}")
    root.value = written_back.wrapped(value, root)
    return root.value


class _OwnersDefault:
    """A parameter's default, which stays at its owner."""

    def __repr__(self):
        return "<its default at its owner>"


OWNERS_DEFAULT = _OwnersDefault()
_KINDS = {int(kind): kind for kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                       inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.KEYWORD_ONLY,
                                       inspect.Parameter.VAR_KEYWORD)}


def _signature(link):
    """inspect.signature of the object at its owner, once per proxy: its parameters' names,
    kinds and whether each has a default (upstream counts a function's parameters:
    ModelPatcher.set_model_sampler_cfg_function)."""
    found = link.signature
    if found is None:
        described = link.invoke("get", "__signature__")
        try:
            found = inspect.Signature([inspect.Parameter(name, _KINDS[kind],
                                                         default=OWNERS_DEFAULT if has_default else inspect.Parameter.empty)
                                       for name, kind, has_default in described])
        except (KeyError, TypeError, ValueError) as error:
            raise RemoteError(f"the signature of {link.describe()} is malformed: {error}") from None
        link.signature = found
    return found


def described_signature(obj):
    """What a peer reads of our object's signature: [name, kind, has a default] per parameter."""
    return [[p.name, int(p.kind), p.default is not inspect.Parameter.empty]
            for p in inspect.signature(obj).parameters.values()]


def _setattr(proxy, name, value):
    object.__getattribute__(proxy, "_remote").invoke("set", name, value=value)


def _no_delete(proxy, name):
    raise RemoteError(f"{object.__getattribute__(proxy, '_remote').describe()}: {name} cannot be deleted from "
                      "another process")


def _nothing(*_, **__):
    return None


def _call(proxy, *args, **kwargs):
    return object.__getattribute__(proxy, "_remote").invoke("call", "__call__", args, kwargs)


def _no_pickle(proxy, *_):
    raise TypeError(f"{object.__getattribute__(proxy, '_remote').describe()} is a remote object and is never "
                    "pickled")


def _itself(proxy, *_):
    return proxy


def _repr(proxy):
    link = object.__getattribute__(proxy, "_remote")
    return f"<remote {link.describe()}, object {link.id}>"


_classes = {}
_classes_lock = threading.Lock()


def proxy_class(kind, type_path=None):
    """The proxy class of an object of `kind` whose class is `type_path` ("module.Name") at
    its owner: a subclass of that class where this process has it and it is of the kind,
    else of the kind's upstream class where that is imported here, else of object."""
    base = kind.upstream_class(importing=True) if kind is not CALLABLE else None
    exact = _class_at(type_path) if base is not None else None
    if exact is not None and issubclass(exact, base):
        base = exact
    key = (kind.name, base)
    with _classes_lock:
        cls = _classes.get(key)
        if cls is None:
            namespace = {"__getattribute__": _getattribute, "__setattr__": _setattr, "__delattr__": _no_delete,
                         "__reduce__": _no_pickle, "__reduce_ex__": _no_pickle, "__copy__": _itself,
                         "__deepcopy__": _itself, "__repr__": _repr,
                         # Never upstream's own set-up or clean-up, on an object that is not here.
                         "__init__": _nothing, "__del__": _nothing}
            # Callable where its kind lets it be called, even where this process lacks its class.
            if "__call__" in kind.calls or any("__call__" in vars(c) for c in (base or object).__mro__):
                namespace["__call__"] = _call
            cls = type(f"Remote{(base or object).__name__}", (base or object,), namespace)
            _classes[key] = cls
        return cls


def _class_at(type_path):
    """The class `type_path` names, in a module already imported here; None otherwise."""
    module, _, name = str(type_path or "").rpartition(".")
    found = getattr(sys.modules.get(module), name, None) if module else None
    return found if isinstance(found, type) else None


def type_path_of(value):
    return f"{type(value).__module__}.{type(value).__qualname__}"


def make_proxy(link):
    cls = proxy_class(link.kind, link.type_name)
    proxy = object.__new__(cls)
    torch = sys.modules.get("torch")
    if torch is not None and issubclass(cls, torch.nn.Module):
        torch.nn.Module.__init__(proxy)  # its own empty books, set with object.__setattr__
    object.__setattr__(proxy, "_remote", link)
    return proxy


def link_of(value):
    """The link of a proxy, or None for any other value."""
    if type(value).__getattribute__ is not _getattribute:
        return None
    return object.__getattribute__(value, "_remote")


def kind_named(name):
    kind = (CALLABLE if name == CALLABLE.name else rules.by_name.get(name)) if isinstance(name, str) else None
    if kind is None:
        raise RemoteError(f"an object of unknown kind {str(name)[:40]!r}")
    return kind


_ABSENT = object()


def _absent(obj, name):
    """Whether `obj` has no attribute `name`, found without running any of its code: neither
    in its class nor in its own dict, nor among a torch module's parameters, buffers and
    submodules."""
    if inspect.getattr_static(obj, name, _ABSENT) is not _ABSENT:
        return False
    own = inspect.getattr_static(obj, "__dict__", {})
    return not any(isinstance(own.get(books), dict) and name in own[books]
                   for books in ("_parameters", "_buffers", "_modules"))


def serve(obj, kind, do, name, args, kwargs, value, enforce):
    """Runs one use of our object `obj` the peer asked for. With `enforce`, the pack's name
    ("pack impact": the host serving a pack), only what `kind` lists, each path argument
    checked, and each refusal logged; never a private name, but for its signature."""
    if do == "get" and name == "__signature__":
        return described_signature(obj)
    if not isinstance(name, str) or (name.startswith("_") and name != "__call__"):
        raise _refusal(enforce, f"no use of {str(name)[:40]!r} on an object of another process")
    # Reading a method it may call hands over the bound method, as a remote callable.
    if enforce and not (kind.allows(do, name) or (do == "get" and kind.allows("call", name))):
        if do == "get" and _absent(obj, name):
            # hasattr's question, which upstream asks of every patch function (its "models"),
            # answered as in one process; looked up without running any code of the object's.
            raise AttributeError(f"{type(obj).__name__} has no attribute {name!r}")
        verb = {"get": "read", "set": "set", "call": "call"}.get(do, str(do)[:20])
        raise refused(enforce, f"a pack may not {verb} {name} of the host's {kind.name}; "
                               f"what it may use is listed in comfy_supervisor.crossing.kinds")
    if do == "get":
        return getattr(obj, name)
    if do == "set":
        setattr(obj, name, value)
        return None
    if do == "call":
        target = obj if name == "__call__" else getattr(obj, name)
        if not callable(target):
            raise RemoteError(f"{name} of {kind.name} is not callable")
        if enforce and name in kind.paths:
            _check_path(obj, kind, name, target, args, kwargs, enforce)
        return target(*args, **kwargs)
    raise RemoteError(f"an unknown use {str(do)[:20]!r} of a remote object")


def _check_path(obj, kind, name, target, args, kwargs, pack):
    """Refuses a path argument that is not public names (upstream walks it with getattr at
    the owner), or whose walk would pass through anything but ComfyUI's own objects and
    torch modules. A name missing on the way is upstream's to answer, as in one process."""
    spec = kind.paths[name]
    try:
        path = inspect.signature(target).bind(*args, **kwargs).arguments.get(spec.argument)
    except TypeError:
        return  # the call raises its own TypeError
    what = f"{name}({str(path)[:80]!r}) of the host's {kind.name}"
    segments = path_segments(path)
    if segments is None:
        raise refused(pack, f"{what}: a path is public names and indices only, no private or dunder name")
    if spec.patches is not None:
        # Upstream sets its object patches in the order added: one under another would be
        # walked through what the other sets, which no check here saw.
        overlap = next((key for key in getattr(obj, spec.patches) if isinstance(key, str) and key != path and
                        (path.startswith(f"{key}.") or key.startswith(f"{path}."))), None)
        if overlap is not None:
            raise refused(pack, f"{what}: it overlaps the object patch {overlap[:80]!r}")
    at, passed = getattr(obj, spec.root), spec.root
    for segment in segments[:-1] + [None]:  # each object the walk reads a name of
        if not walkable(at):
            raise refused(pack, f"{what}: {passed} is a {type(at).__name__}, not a part of the model a path may "
                                "pass through")
        if segment is None:
            return
        try:
            at = getattr(at, segment)
        except AttributeError:
            return
        passed = f"{passed}.{segment}"


def export_kind(value, pack=None):
    """The kind our `value` crosses to the peer as (None: not as a remote object). To a
    pack (`pack`, its name, where the host exports): kind_for_pack's, a withheld object
    refused in one line and logged."""
    if not pack:
        return kind_of(value)
    try:
        return kind_for_pack(value)
    except Withheld as withheld:
        raise refused(pack, f"{withheld} is never handed to a pack") from None


_refusals = {}  # the pack's name -> [when its last line was logged, refusals since that were not]
_refusals_lock = threading.Lock()


def refused(pack, message):
    """The RemoteError a pack gets for `message`, logged in the host's log with the pack's
    name: one line at most per REFUSAL_LOG_INTERVAL_S a pack, the rest counted."""
    now = time.monotonic()
    with _refusals_lock:
        last, unsaid = _refusals.get(pack, (None, 0))
        due = last is None or now - last >= REFUSAL_LOG_INTERVAL_S
        _refusals[pack] = [now, 0] if due else [last, unsaid + 1]
    if due:
        more = f" ({unsaid} more refused since the last such line)" if unsaid else ""
        log.warning("comfy-supervisor: %s: refused its use of the host's objects: %s%s", pack, message, more)
    return RemoteError(message)


def _refusal(enforce, message):
    return refused(enforce, message) if enforce else RemoteError(message)


def identity_cache():
    """A session's map from a peer's object id to the one proxy standing for it here."""
    return weakref.WeakValueDictionary()


__all__ = ["CALLABLE", "Exports", "Link", "RemoteError", "RemoteMethod", "export_kind", "identity_cache", "kind_named",
           "kind_of", "link_of", "make_proxy", "proxy_class", "refused", "serve", "type_path_of"]
