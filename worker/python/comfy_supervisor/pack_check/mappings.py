"""The node classes a pack registers, as the reading computes them from its __init__.py:
its NODE_CLASS_MAPPINGS however it is built (a dict literal, `.update`, item assignment,
`**` merges, comprehensions, the pack's own functions), or, without one, the classes its
comfy_entrypoint()'s extension lists (get_node_list), by their schemas' node_id, as the
pack worker and upstream's loader take them (pack_worker/v3_nodes.py)."""

from .calls import call_function
from .interfaces import read
from .values import Instance, PackClass, PackFunction, Unknown


class Registered:
    """One entry: its name, its class as computed, the condition it is set under (None:
    always), and its interface."""

    def __init__(self, name, cls, condition):
        self.name, self.cls, self.condition = name, cls, condition
        self.interface = None


def registered(interpreter, source):
    """([Registered], why none are known or None)."""
    env = interpreter.module_frame(source.modules[""]).env
    mapping = env.get("NODE_CLASS_MAPPINGS")
    if isinstance(mapping, dict):
        conditions = getattr(mapping, "conditions", {})
        found = [Registered(name, cls, conditions.get(name)) for name, cls in mapping.items() if isinstance(name, str)]
    elif mapping is not None:
        reason = mapping.reason if isinstance(mapping, Unknown) else f"a {type(mapping).__name__}"
        return [], f"its NODE_CLASS_MAPPINGS is {reason} (computed at import)"
    elif isinstance(env.get("comfy_entrypoint"), PackFunction):
        found, why = _from_entrypoint(interpreter, env["comfy_entrypoint"])
        if why:
            return [], why
    else:
        return [], "its __init__.py defines no NODE_CLASS_MAPPINGS and no comfy_entrypoint the reading can see"
    for entry in found:
        entry.interface = entry.interface or read(interpreter, entry.cls)
    return found, None if found else "its NODE_CLASS_MAPPINGS is empty"


def _from_entrypoint(interpreter, entrypoint):
    extension = call_function(interpreter, entrypoint, [], {})
    if not isinstance(extension, Instance):
        return [], f"its comfy_entrypoint() returns {getattr(extension, 'reason', 'no extension of the pack')}"
    listing = interpreter.class_attribute(extension.cls, "get_node_list", extension)
    classes = call_function(interpreter, listing, [], {}) if isinstance(listing, PackFunction) else listing
    if not isinstance(classes, (list, tuple)):
        return [], f"its extension's get_node_list() is {getattr(classes, 'reason', 'not a list')}"
    found = []
    for cls in classes:
        interface = read(interpreter, cls) if isinstance(cls, PackClass) else None
        node_id = interface.node_id if interface is not None else None
        if not isinstance(node_id, str):
            return [], f"a class its extension lists has no node_id the reading can compute ({cls!r})"
        entry = Registered(node_id, cls, None)
        entry.interface = interface
        found.append(entry)
    return found, None
