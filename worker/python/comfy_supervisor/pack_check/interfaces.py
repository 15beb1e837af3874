"""A node class's interface as the reading computes it: its inputs by name with their types,
its output types, and the method a call runs. The older API's INPUT_TYPES() (read through
its body), RETURN_TYPES and FUNCTION; a comfy_api class's define_schema() (io.Schema's
inputs and outputs, each type named by upstream's naming: io.ClipVision is CLIP_VISION).
What upstream would refuse of it (an INPUT_TYPES() that is no dict, a RETURN_TYPES that is
no list) is a refusal; what the reading cannot compute is unknown, with why."""

import re

from .calls import call_function
from .values import AnyInputs, External, ExternalCall, PackClass, PackFunction, Unknown, type_word

# comfy_api io classes whose type is not their name in upper snake case.
_IO_NAMES = {"AnyType": "*", "MultiCombo": "COMBO"}


class Interface:
    def __init__(self):
        self.inputs = {}        # name -> the type as computed
        self.outputs = []       # types as computed
        self.function = None    # the method a call runs (a PackFunction), where found
        self.refused = []       # what upstream (or the host's proxy) refuses of the interface
        self.unknown = []       # what the reading cannot compute of it
        self.node_id = None     # a comfy_api class's schema's node_id


def is_v3(interpreter, cls, seen=()):
    """Whether `cls` is a comfy_api io.ComfyNode class (through the pack's own bases)."""
    for base in interpreter.bases(cls):
        if isinstance(base, External) and base.path.endswith("ComfyNode"):
            return True
        if isinstance(base, PackClass) and base not in seen and is_v3(interpreter, base, seen + (cls,)):
            return True
    return False


def read(interpreter, cls):
    """The Interface of the node class `cls` (a PackClass, or what the mapping held)."""
    found = Interface()
    if not isinstance(cls, PackClass):
        reason = cls.reason if isinstance(cls, Unknown) else f"{type_word(cls)}, not a class of the pack"
        found.unknown.append(f"its class is {reason}")
        return found
    if is_v3(interpreter, cls):
        _read_schema(interpreter, cls, found)
    else:
        _read_older(interpreter, cls, found)
    return found


def _called(interpreter, cls, name):
    method = interpreter.class_attribute(cls, name, cls)
    if not isinstance(method, PackFunction):
        return method if isinstance(method, Unknown) else Unknown(f"{name} is not a method")
    return call_function(interpreter, method, [], {})


def _read_older(interpreter, cls, found):
    sections = _called(interpreter, cls, "INPUT_TYPES")
    if isinstance(sections, Unknown) and sections.raised_at:
        found.unknown.append(f"its INPUT_TYPES() raises at {sections.raised_at} where the reading follows it "
                             "(ComfyUI leaves out a class whose INPUT_TYPES() raises)")
    elif isinstance(sections, Unknown):
        found.unknown.append(f"its INPUT_TYPES() is {sections.reason}")
    elif not isinstance(sections, dict):
        found.refused.append(f"its INPUT_TYPES() returns {type_word(sections)}, not a dict of sections")
    else:
        for section, inputs in sections.items():
            if section == "hidden":
                continue  # filled by ComfyUI from the prompt: plain values
            _read_section(section, inputs, found)
    returns = interpreter.class_attribute(cls, "RETURN_TYPES", cls)
    if isinstance(returns, Unknown):
        found.unknown.append(f"its RETURN_TYPES is {returns.reason}")
    elif not isinstance(returns, (list, tuple)):
        found.refused.append(f"its RETURN_TYPES is {type_word(returns)}, not a list of types")
    else:
        found.outputs = list(returns)
    name = interpreter.class_attribute(cls, "FUNCTION", cls)
    if isinstance(name, str):
        method = interpreter.class_attribute(cls, name, cls)
        found.function = method if isinstance(method, PackFunction) else None


def _read_section(section, inputs, found):
    if isinstance(inputs, Unknown):
        found.unknown.append(f"its {section} inputs are {inputs.reason}")
        return
    if not isinstance(inputs, dict):
        found.refused.append(f"its {section} inputs are {type_word(inputs)}, not a dict")
        return
    if isinstance(inputs, AnyInputs):
        found.inputs[f"(any {section} name)"] = inputs.default
    for name, spec in inputs.items():
        if isinstance(spec, (list, tuple)) and spec:
            found.inputs[str(name)] = spec[0]
        elif isinstance(spec, Unknown) or getattr(spec, "uncertain", False):
            found.inputs[str(name)] = spec if isinstance(spec, Unknown) else Unknown(f"the spec of input {name!r}")
        else:
            found.refused.append(f"its input {name!r} is {type_word(spec)}, not a list of its type and options")


def _io_type(io_call):
    """The type an io.X.Input(...) or io.X.Output(...) names."""
    function = io_call.function
    if function.of_call is not None:  # io.Custom("X").Input(...)
        args = function.of_call.args
        return args[0] if args and isinstance(args[0], str) else Unknown(f"the type of {function.of_call.path}")
    name = function.path.split(".")[-2] if function.path.count(".") else ""
    if not name:
        return Unknown(f"the type of {function.path}")
    return _IO_NAMES.get(name) or re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper()


def _read_schema(interpreter, cls, found):
    schema = _called(interpreter, cls, "define_schema")
    if not (isinstance(schema, ExternalCall) and schema.path.endswith("Schema")):
        found.unknown.append(f"its define_schema() is {getattr(schema, 'reason', 'not an io.Schema')}")
        return
    found.node_id = schema.kwargs.get("node_id", schema.args[0] if schema.args else None)
    for part, into in (("inputs", None), ("outputs", found.outputs)):
        items = schema.kwargs.get(part, [])
        if not isinstance(items, (list, tuple)):
            found.unknown.append(f"its schema's {part} are {getattr(items, 'reason', 'not a list')}")
            continue
        for index, item in enumerate(items):
            kind = _io_type(item) if isinstance(item, ExternalCall) else \
                Unknown(getattr(item, "reason", f"{part} {index} of its schema"))
            if into is not None:
                into.append(kind)
            else:
                name = item.args[0] if isinstance(item, ExternalCall) and item.args else item.kwargs.get("id") \
                    if isinstance(item, ExternalCall) else None
                found.inputs[str(name if isinstance(name, str) else f"input {index}")] = kind
    execute = interpreter.class_attribute(cls, "execute", cls)
    found.function = execute if isinstance(execute, PackFunction) else None
