"""Containers read from a remote object's writable attribute, whose changes in place are set
back on the owner's object (docs/PACKS.md, "Remote objects").

In one process `model.model_options` is the patcher's own dict, and packs change it in
place: IPAdapter sets `model.model_options["transformer_options"] = to` on its clone, others
write a key deeper down. Read across processes, the attribute is a copy, and a change to
the copy alone would be lost without a word. So a dict or list read of an attribute the
kind lets the other side set (object_kinds: `writes`) comes wrapped: each change, at any
depth, sets the whole attribute back on the owner's object, one use of it, as the pack
could itself; what the pack copies (`.copy()`, `dict(...)`, `copy.deepcopy`) is its own,
as in one process.
"""

import copy
import weakref

_roots = weakref.WeakSet()  # the roots read in this process and not let go of yet


class Root:
    """The attribute a wrapped container was read from (`what` names it), and the whole value
    to set back. A container and its root refer to each other: let_go() ends that, so that
    what they hold of the owner's is freed at once, not at some later collection of cycles."""

    def __init__(self, setter, what):
        self.setter = setter
        self.what = what
        self.value = None
        _roots.add(self)

    def check(self):
        if self.setter is None:
            raise ReferenceError(f"{self.what} was changed after the node call that read it returned: the owner "
                                 "takes changes to it only during that call")

    def write(self):
        self.setter(self.value)


def let_go():
    """The node call that read them returned: every container read since stops writing back
    (a later change raises one line), and lets go of its owner's object."""
    for root in list(_roots):
        root.setter = root.value = None
    _roots.clear()


def wrapped(value, root):
    """`value` as read at `root`: a dict or list wrapped, anything else as it is."""
    if type(value) is dict:
        return WrittenBackDict(value, root)
    if type(value) is list:
        return WrittenBackList(value, root)
    return value


def plain(value):
    """`value` with every wrapped container in it a plain one again."""
    if isinstance(value, dict):
        return {key: plain(item) for key, item in dict.items(value)}
    if isinstance(value, list):
        return [plain(item) for item in list.__iter__(value)]
    return value


class _Wrapped:
    """What the dict and the list share: reads that wrap what they hold (by key or index,
    and as they are iterated: `items()` and `values()` are lists, not views), copies that
    are plain, and never pickled with their root."""

    def _held(self, key, value, store):
        found = wrapped(value, self._root)
        if found is not value:
            store(self, key, found)  # the same object at each read, as in one process
        return found

    def copy(self):
        return plain(self)

    def __copy__(self):
        return plain(self)

    def __deepcopy__(self, memo):
        return copy.deepcopy(plain(self), memo)

    def __reduce__(self):
        return type(plain(self)), (plain(self),)


def _changing(method):
    """The container's own `method`, then the whole attribute set back."""
    def change(self, *args, **kwargs):
        self._root.check()  # before the change: a refused one changes nothing here either
        result = method(self, *args, **kwargs)
        self._root.write()
        return self if result is NotImplemented else result
    change.__name__ = method.__name__
    return change


def _changes(base, *names):
    """A class decorator: each of `names`, the `base` container's own method, sets the whole
    attribute back after it."""
    def install(cls):
        for name in names:
            setattr(cls, name, _changing(getattr(base, name)))
        return cls
    return install


@_changes(dict, "__setitem__", "__delitem__", "__ior__", "update", "pop", "popitem", "clear")
class WrittenBackDict(_Wrapped, dict):
    def __init__(self, items, root):
        dict.__init__(self, items)
        self._root = root

    def __getitem__(self, key):
        return self._held(key, dict.__getitem__(self, key), dict.__setitem__)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def values(self):
        return [self[key] for key in self]

    def items(self):
        return [(key, self[key]) for key in self]

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]


@_changes(list, "__setitem__", "__delitem__", "__iadd__", "append", "extend", "insert", "remove", "pop", "clear",
          "sort", "reverse")
class WrittenBackList(_Wrapped, list):
    def __init__(self, items, root):
        list.__init__(self, items)
        self._root = root

    def __getitem__(self, index):
        if isinstance(index, slice):
            return list.__getitem__(self, index)
        return self._held(index, list.__getitem__(self, index), list.__setitem__)

    def __iter__(self):
        return (self[index] for index in range(len(self)))
