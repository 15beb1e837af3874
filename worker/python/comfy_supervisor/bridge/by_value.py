"""Upstream's value classes, which cross between the host and a pack by value (docs/PACKS.md,
"Remote objects"): the receiver gets its own object of the same upstream class, built from
what the sender's held, as a tensor crosses.

These are comfy.conds' conditioning values: what upstream's BaseModel.extra_conds makes
of a CONDITIONING for the model (the cross attention as a CONDCrossAttn, a pooled output
or an image embedding as a CONDRegular, a concat latent as a CONDNoiseShape, a frame count
as a CONDConstant, reference latents as a CONDList), and what packs put into a
CONDITIONING's "model_conds". Each holds one field, `cond` (a tensor, a plain value or a
list of tensors), and its methods only read it, so a copy on each side behaves as the
one object would in one process; and upstream's sampler calls them on every step for
every conditioning, where a round trip each would cost more than the step. And upstream's
ExecutionBlocker, which a node returns in place of an output to stop the nodes after it
(its one field, `message`, what upstream reports, or None to stop them silently).

Only an object whose class is exactly one of CLASSES crosses so (a pack's subclass of
one, with methods of its own, crosses as a remote object of the kind COND,
bridge/object_kinds.py). On the wire it is {"$": "value", "class", "state"}; the receiver
builds only a class named here, from a state of exactly its fields, with upstream's own
constructor: nothing is unpickled or looked up by a name the peer chose.
"""

import importlib
import sys

_CONDS = ("comfy.conds", ("cond",))
# Each class that crosses by value: its module and the fields its constructor takes, in order.
CLASSES = {"CONDRegular": _CONDS, "CONDNoiseShape": _CONDS, "CONDCrossAttn": _CONDS, "CONDConstant": _CONDS,
           "CONDList": _CONDS, "ExecutionBlocker": ("comfy_execution.graph_utils", ("message",))}


class ByValueError(TypeError):
    """A value class the peer sent that cannot be built here; the message is one line."""


def state_of(value):
    """(class name, state) for an object that crosses by value, or None for any other."""
    cls = type(value)
    module, fields = CLASSES.get(cls.__qualname__, (None, ()))
    if cls.__module__ != module or sys.modules.get(module) is None:
        return None
    if getattr(sys.modules[module], cls.__qualname__, None) is not cls:
        return None
    return cls.__qualname__, {field: getattr(value, field) for field in fields}


def check(tag):
    """Raises ByValueError unless `tag` names a class of CLASSES with a state of its fields."""
    name, state = tag.get("class"), tag.get("state")
    if name not in CLASSES:
        raise ByValueError(f"a value of class {str(name)[:60]!r}, which does not cross by value (those that do: "
                           f"{', '.join(CLASSES)})")
    fields = CLASSES[name][1]
    if not isinstance(state, dict) or sorted(state) != sorted(fields):
        raise ByValueError(f"a {name} whose state is not exactly {', '.join(fields)}")


def build(name, state):
    """This process's own `name` of its upstream module, from its decoded state."""
    module_name, fields = CLASSES[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ByValueError(f"a {name} came, and this process has no {module_name} to build it with ({error})") \
            from None
    cls = getattr(module, name, None)
    if not isinstance(cls, type):
        raise ByValueError(f"a {name} came, and this process's {module_name} has no such class")
    return cls(*(state[field] for field in fields))
