"""Socket types whose equality a pack customised, and sections of inputs that take any
name, rebuilt in the host from its worker's description (pack_worker/__main__.py, _plain).

Upstream compares a link's type with an input's with `!=` (comfy_execution/validation.py),
so packs declare an "any type" socket as a str subclass that is never unequal, and inputs
of any name as a dict subclass that contains every name (rgthree's
FlexibleOptionalInputType). Sent as a plain string, such a type fails upstream's
validation, where in one process it passes. The worker describes them as
{"$any": name}, {"$equal": name, "to": [the core types it equals]} and {"$inputs": items,
"$default": any other name's spec}; the host's proxy declares the same behaviour with
these classes, which serialise as the pack's own do (the name; the items).
"""


class AnyType(str):
    """A type equal to every other, as a pack's wildcard is."""

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


class EqualType(str):
    """A type equal to itself and to the core types the pack's type said it equals."""

    def __new__(cls, name, others):
        made = super().__new__(cls, name)
        made.others = frozenset(others)
        return made

    def __ne__(self, other):
        return str.__ne__(self, other) and other not in self.others

    __hash__ = str.__hash__


class HiddenKind(tuple):
    """A hidden input as a comfy_api node declares it, (kind,): what /object_info shows of it
    in one process. Equal to its kind's name too, as upstream's execution asks an older
    node's hidden inputs (h[x] == "PROMPT"), so that the proxy is given their values."""

    def __eq__(self, other):
        return other == self[0] if isinstance(other, str) else tuple.__eq__(self, other)

    def __ne__(self, other):
        return not self == other

    __hash__ = tuple.__hash__


class AnyInputs(dict):
    """A section of inputs that takes any name: a name it does not list is `default`."""

    def __init__(self, inputs, default):
        super().__init__(inputs)
        self.default = default

    def __contains__(self, name):
        return True

    def __getitem__(self, name):
        return dict.__getitem__(self, name) if dict.__contains__(self, name) else self.default

    def copy(self):
        return AnyInputs(self, self.default)


def is_type(value):
    """A type as a worker describes one: a name, a combo's list of choices, or a marker."""
    if isinstance(value, (str, list)):
        return True
    if isinstance(value, dict) and set(value) == {"$any"}:
        return isinstance(value["$any"], str)
    if isinstance(value, dict) and set(value) == {"$equal", "to"}:
        return isinstance(value["$equal"], str) and isinstance(value["to"], list) and \
            all(isinstance(kind, str) for kind in value["to"])
    return False


def is_type_marker(value):
    return isinstance(value, dict) and ("$any" in value or "$equal" in value) and is_type(value)


def is_any_inputs(section):
    return isinstance(section, dict) and set(section) == {"$inputs", "$default"}


def type_of(marker):
    """The type a marker describes (is_type_marker)."""
    if "$any" in marker:
        return AnyType(marker["$any"])
    return EqualType(marker["$equal"], marker["to"])
