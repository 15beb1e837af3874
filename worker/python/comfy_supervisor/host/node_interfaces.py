"""What ComfyUI sees of an isolated pack's node: a proxy class with the pack's own
interface, as its worker described it (pack_worker/__main__.py, describe()).

The description comes from a worker, so it is input, not truth, and a node's odd interface
(an INPUT_TYPES() that returns a list, a RETURN_TYPES that is a number) must cost that
node alone: proxy_class() checks every member upstream reads before it builds the class,
and raises InterfaceError with one line naming the member. Upstream's own expectations,
which the checks follow: INPUT_TYPES() a dict of sections ("required", "optional",
"hidden"), each a dict of input names; an input a list whose first item is its type (a
name, or the list of a combo's choices) and whose second, if any, is a dict of options; a
hidden input may be a bare name; RETURN_TYPES a list of types; RETURN_NAMES a list of
names; OUTPUT_IS_LIST a list of flags; INPUT_IS_LIST a flag; FUNCTION a method's name.
"""

import inspect
import keyword
import weakref

from . import socket_types

_OPTIONAL_INTERFACE = ("RETURN_NAMES", "OUTPUT_IS_LIST", "INPUT_IS_LIST", "DESCRIPTION", "OUTPUT_TOOLTIPS",
                       "DEPRECATED", "EXPERIMENTAL", "API_NODE", "NOT_IDEMPOTENT")
_FLAGS = ("INPUT_IS_LIST", "DEPRECATED", "EXPERIMENTAL", "API_NODE", "NOT_IDEMPOTENT")
# Output types whose values are tensors and plain values: a node that makes only these (or
# combo lists) makes nothing that dies with its worker's life.
_PLAIN_TYPES = frozenset(("IMAGE", "MASK", "LATENT", "INT", "FLOAT", "STRING", "BOOLEAN", "AUDIO", "SIGMAS"))


class InterfaceError(ValueError):
    """A node's interface that ComfyUI could not use; the message is one line."""


def _kind(value):
    if value is None:
        return "null"
    name = type(value).__name__
    if isinstance(value, (list, dict)) and not value:
        return f"an empty {name}"
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _check(condition, member, value, wanted):
    if not condition:
        raise InterfaceError(f"its {member} is {_kind(value)}, not {wanted}")


def _check_spec(spec, where):
    _check(isinstance(spec, list) and spec, where, spec, "a list of its type and options")
    _check(socket_types.is_type(spec[0]), f"{where}'s type", spec[0], "a type name or a list of choices")
    if len(spec) > 1:
        _check(isinstance(spec[1], dict), f"{where}'s options", spec[1], "a dict")


def _check_input_types(sections):
    _check(isinstance(sections, dict), "INPUT_TYPES()", sections, "a dict of sections")
    for section, inputs in sections.items():
        _check(isinstance(inputs, dict), f"INPUT_TYPES() section {section[:40]!r}", inputs, "a dict of inputs")
        if socket_types.is_any_inputs(inputs):  # a section that takes inputs of any name
            _check_spec(inputs["$default"], f"section {section[:40]!r}'s input of any name")
            inputs = inputs["$inputs"]
            _check(isinstance(inputs, dict), f"INPUT_TYPES() section {section[:40]!r}", inputs, "a dict of inputs")
        for name, spec in inputs.items():
            where = f"input {name[:40]!r}"
            if isinstance(spec, str) and section == "hidden":
                continue
            _check_spec(spec, where)


def check_interface(interface):
    """Raises InterfaceError when upstream could not use `interface`, a node's description."""
    _check(isinstance(interface, dict), "interface", interface, "a dict of members")
    _check_input_types(interface.get("INPUT_TYPES"))
    returns = interface.get("RETURN_TYPES", [])
    _check(isinstance(returns, list) and all(socket_types.is_type(kind) for kind in returns), "RETURN_TYPES",
           returns, "a list of types")
    names = interface.get("RETURN_NAMES", [])
    _check(isinstance(names, list) and all(isinstance(name, str) for name in names), "RETURN_NAMES", names,
           "a list of names")
    lists = interface.get("OUTPUT_IS_LIST", [])
    _check(isinstance(lists, list) and all(isinstance(flag, bool) for flag in lists), "OUTPUT_IS_LIST", lists,
           "a list of flags")
    for flag in _FLAGS:
        _check(isinstance(interface.get(flag, False), bool), flag, interface.get(flag), "a flag")
    tooltips = interface.get("OUTPUT_TOOLTIPS", [])
    # An output without a tooltip is None (comfy_api's nodes give one for each output).
    _check(isinstance(tooltips, list) and all(tip is None or isinstance(tip, str) for tip in tooltips),
           "OUTPUT_TOOLTIPS", tooltips, "a list of tooltips")
    module = interface.get("python_module", "")
    _check(isinstance(module, str) and len(module) <= 200, "python_module", module, "a module's name")
    validate = interface.get("VALIDATE_INPUTS")
    _check(validate is None or (isinstance(validate, dict) and isinstance(validate.get("args", []), list)),
           "VALIDATE_INPUTS", validate, "a signature")


def _as_tuples(value):
    """JSON's lists back into the tuples upstream's interfaces are written with; a list
    of choices (a combo input's type) stays a list; a type of customised equality is
    that type again (socket_types)."""
    if isinstance(value, list) and not all(isinstance(item, str) for item in value):
        return tuple(_as_tuples(item) for item in value)
    if socket_types.is_type_marker(value):
        return socket_types.type_of(value)
    if isinstance(value, dict):
        return {key: _as_tuples(item) for key, item in value.items()}
    return value


def _section(inputs, hidden=False):
    """A section of INPUT_TYPES() as upstream reads it; in the hidden one, a comfy_api node's
    (kind,) as such (socket_types.HiddenKind)."""
    if socket_types.is_any_inputs(inputs):
        return socket_types.AnyInputs(_section(inputs["$inputs"]), _as_tuples(inputs["$default"]))
    return {name: socket_types.HiddenKind(spec) if hidden and isinstance(spec, list) and len(spec) == 1 else
            _as_tuples(spec) if isinstance(spec, list) else spec for name, spec in inputs.items()}


def _identifier(name, what):
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__"):
        raise InterfaceError(f"its {what} {str(name)[:40]!r} is not a name a method can have")
    return name


class _PackNodeClass(type):
    """The class of a proxy class. Upstream sets RELATIVE_PYTHON_MODULE (what /object_info
    calls python_module) on every class a custom node module maps, to that module's name:
    comfy_supervisor's, for a proxy. The node is the pack's, so its class keeps the pack's."""

    @property
    def RELATIVE_PYTHON_MODULE(cls):
        return cls.PACK_PYTHON_MODULE

    @RELATIVE_PYTHON_MODULE.setter
    def RELATIVE_PYTHON_MODULE(cls, _):
        pass  # the module that registered the proxy is not the node's


def proxy_class(link, node, interface):
    """A class upstream runs as if it were the pack's node; it runs the node in the worker
    through `link` (proxy_nodes.PackLink). Raises InterfaceError for an interface
    upstream could not use."""
    check_interface(interface)
    function = _identifier(interface.get("FUNCTION"), "FUNCTION")
    input_types = {section: _section(inputs, hidden=section == "hidden")
                   for section, inputs in interface["INPUT_TYPES"].items()}
    attributes = {
        "__module__": __name__,
        "__doc__": f"{node} of pack {link.name}, run in the pack's worker.",
        "PACK": link.name,
        "PACK_PYTHON_MODULE": interface.get("python_module") or f"custom_nodes.{link.name}",
        "CATEGORY": str(interface.get("CATEGORY", "isolated")),
        "RETURN_TYPES": tuple(_as_tuples(kind) for kind in interface.get("RETURN_TYPES", ())),
        "FUNCTION": function,
        "OUTPUT_NODE": bool(interface.get("OUTPUT_NODE", False)),
        "INPUT_TYPES": classmethod(lambda cls: {section: inputs.copy() for section, inputs in input_types.items()}),
    }
    for member in _OPTIONAL_INTERFACE:
        if member in interface:
            value = interface[member]
            attributes[member] = tuple(value) if isinstance(value, list) else value

    def __init__(self):
        self.instance = next(link.instance_ids)
        weakref.finalize(self, link.forget_instance, self.instance)

    def run(self, **inputs):
        result = link.call(node, "function", inputs, instance=self.instance)
        if link.handle_generation.get(node) is not None and "IS_CHANGED" not in vars(type(self)):
            # Its outputs hold what dies with the worker's life: from now on IS_CHANGED names
            # the life, so that ComfyUI runs the node again rather than reuse them.
            type(self).IS_CHANGED = classmethod(is_changed)
        return result

    def is_changed(cls, **inputs):
        answer = link.call(node, "is_changed", inputs) if interface.get("IS_CHANGED") else None
        generation = link.handle_generation.get(node)
        return answer if generation is None else [answer, generation]

    def check_lazy_status(self, **inputs):
        return link.call(node, "check_lazy_status", inputs, instance=self.instance)

    attributes["__init__"] = __init__
    attributes[function] = run
    if interface.get("check_lazy_status") is True:
        # Upstream asks a node with it which of its lazy inputs to compute (None: not yet).
        attributes["check_lazy_status"] = check_lazy_status
    # Upstream saves IS_CHANGED's answer in the prompt, and so in each image's metadata: a
    # proxy has one where the pack's class has, or where its outputs may hold objects.
    plain = all(isinstance(kind, list) or kind in _PLAIN_TYPES for kind in attributes["RETURN_TYPES"])
    if interface.get("IS_CHANGED") or not plain:
        attributes["IS_CHANGED"] = classmethod(is_changed)
    validate = interface.get("VALIDATE_INPUTS")
    if isinstance(validate, dict):
        def validate_inputs(cls, **inputs):
            return link.call(node, "validate_inputs", inputs)

        # Upstream hands VALIDATE_INPUTS the inputs its signature names: the pack's own.
        parameters = [inspect.Parameter(_identifier(name, "VALIDATE_INPUTS argument"),
                                        inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in validate.get("args", [])]
        if validate.get("varkw"):
            parameters.append(inspect.Parameter("inputs", inspect.Parameter.VAR_KEYWORD))
        validate_inputs.__signature__ = inspect.Signature(parameters)
        attributes["VALIDATE_INPUTS"] = classmethod(validate_inputs)
    return _PackNodeClass(node if node.isidentifier() else "PackNode", (), attributes)
