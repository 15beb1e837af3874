"""Values that cross between the host and a pack by value (docs/PACKS.md, "Remote
objects"): the receiver gets its own object of the same class, built from what the
sender's held, as a tensor crosses. Which classes do is the rules' (rules.by_value, listed
in comfy_supervisor.crossing.by_value_classes): upstream's conditioning values, whose
methods only read their one field and which upstream's sampler calls on every step, where
a round trip each would cost more than the step.

Only an object whose class is exactly one of those crosses so (a subclass of one, with
methods of its own, crosses as a remote object). On the wire it is {"$": "value",
"class", "state"}; the receiver builds only a class the rules name, from a state of
exactly its fields, with the class's own constructor: nothing is unpickled or looked up
by a name the peer chose.
"""

import importlib
import sys

from . import rules


class ByValueError(TypeError):
    """A value class the peer sent that cannot be built here; the message is one line."""


def state_of(value):
    """(class name, state) for an object that crosses by value, or None for any other."""
    cls = type(value)
    module, fields = rules.by_value.get(cls.__qualname__, (None, ()))
    if cls.__module__ != module or sys.modules.get(module) is None:
        return None
    if getattr(sys.modules[module], cls.__qualname__, None) is not cls:
        return None
    return cls.__qualname__, {field: getattr(value, field) for field in fields}


def check(tag):
    """Raises ByValueError unless `tag` names a class of the rules with a state of its fields."""
    name, state = tag.get("class"), tag.get("state")
    if name not in rules.by_value:
        raise ByValueError(f"a value of class {str(name)[:60]!r}, which does not cross by value (those that do: "
                           f"{', '.join(rules.by_value)})")
    fields = rules.by_value[name][1]
    if not isinstance(state, dict) or sorted(state) != sorted(fields):
        raise ByValueError(f"a {name} whose state is not exactly {', '.join(fields)}")


def build(name, state):
    """This process's own `name` of its module, from its decoded state."""
    module_name, fields = rules.by_value[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ByValueError(f"a {name} came, and this process has no {module_name} to build it with ({error})") \
            from None
    cls = getattr(module, name, None)
    if not isinstance(cls, type):
        raise ByValueError(f"a {name} came, and this process's {module_name} has no such class")
    return cls(*(state[field] for field in fields))
