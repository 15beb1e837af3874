"""What the reading computes a pack's names to be, beside Python's own plain values (str,
int, float, bool, None, tuple, list, dict): the pack's classes and functions, names from
outside the pack, and what it cannot compute, with why."""


class Unknown:
    """A value the reading cannot compute; `reason` says why (it is computed at import).
    `raised_at` is FILE:LINE where it is what a call of the pack's gives that raises."""

    raised_at = None

    def __init__(self, reason):
        self.reason = reason

    def __repr__(self):
        return f"<unknown: {self.reason}>"


class External:
    """A name from outside the pack (ComfyUI's, a library's), by its dotted path; a call of
    one is an ExternalCall, whose result the reading does not compute."""

    def __init__(self, path):
        self.path = path
        self.of_call = None  # the ExternalCall whose attribute this is (io.Custom("X").Input)

    def __repr__(self):
        return self.path


class ExternalCall(Unknown):
    """A call of an external function: its path and arguments, kept for the readers that
    know what upstream's calls make (comfy_api's io.Schema, folder_paths' file lists)."""

    def __init__(self, function, args, kwargs):
        super().__init__(f"the result of {function.path}(...)")
        self.path, self.function, self.args, self.kwargs = function.path, function, args, kwargs


class PackFunction:
    """A function (or lambda) of the pack; `bound` is the class or instance its first
    parameter takes, where it was read as a method."""

    def __init__(self, module, node, bound=None, owner=None):
        self.module, self.node, self.bound, self.owner = module, node, bound, owner

    @property
    def name(self):
        return getattr(self.node, "name", "<lambda>")


class PackClass:
    """A class the pack defines; its namespace is read once, when first asked."""

    def __init__(self, module, node, frame):
        self.module, self.node, self.frame = module, node, frame
        self.namespace = None
        self.bases = None

    @property
    def name(self):
        return self.node.name

    def __repr__(self):
        return f"<class {self.module.name}.{self.name}>"


class Instance:
    """An object of one of the pack's classes."""

    def __init__(self, cls):
        self.cls = cls
        self.attributes = {}


class Wildcard(str):
    """A type of the pack's own str subclass that compares equal to every type (`!=` always
    False), as ComfyUI packs write a wildcard socket; the string is its name."""


class AnyInputs(dict):
    """A section of inputs that takes inputs of any name (a dict subclass of the pack's, as
    rgthree's FlexibleOptionalInputType): its named inputs, and the type of any other."""

    def __init__(self, known, default):
        super().__init__(known)
        self.default = default


class Mapping(dict):
    """A dict of the pack's, with the condition each key was set under, where one was."""

    def __init__(self, *args):
        super().__init__(*args)
        self.conditions = {}

    def put(self, key, value, condition):
        self[key] = value
        if condition:
            self.conditions[key] = condition
        else:
            self.conditions.pop(key, None)

    def merge(self, other, condition):
        for key, value in other.items():
            inner = other.conditions.get(key) if isinstance(other, Mapping) else None
            self.put(key, value, " and ".join(c for c in (condition, inner) if c) or None)


class Items(list):
    """A list of the pack's; `uncertain` once an item was added under a condition, so that
    its truth (empty or not) is no longer known."""

    uncertain = False


class BoundMethod:
    """A method of a plain value (a dict's items, a str's format) read as an attribute."""

    def __init__(self, value, name):
        self.value, self.name = value, name


class Builtin:
    """One of Python's builtins that the reading computes (dict, sorted, ...)."""

    def __init__(self, name):
        self.name = name


def is_known(value):
    """Whether `value` holds nothing unknown, at any depth."""
    if isinstance(value, Unknown):
        return False
    if isinstance(value, (list, tuple)):
        return all(is_known(item) for item in value)
    if isinstance(value, dict):
        return all(is_known(item) for item in value.values())
    return True


def first_unknown(value):
    """The first Unknown in `value`, at any depth, or None."""
    if isinstance(value, Unknown):
        return value
    items = value if isinstance(value, (list, tuple)) else value.values() if isinstance(value, dict) else ()
    for item in items:
        found = first_unknown(item)
        if found is not None:
            return found
    return None


def type_word(value):
    """`value`'s type as a line says it: "a list", "a dict", "an int"."""
    if isinstance(value, (list, tuple, dict)):
        name = "list" if isinstance(value, list) else "tuple" if isinstance(value, tuple) else "dict"
    else:
        name = {PackClass: "class", PackFunction: "function", Instance: "object of the pack"}.get(
            type(value), type(value).__name__)
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
