"""What a node's method does with ComfyUI's objects that cross as remote objects (not
replicas): each attribute it reads or calls of such an input, against what the input's
kind lets a pack do with the host's (crossing/kinds.py). A use its kind does not list is
refused in the worker; so are the uses "Not bridged yet" names (docs/PACKS.md).

Only the method's own body is read, and only uses of the parameter itself (`control.copy()`),
not of what it was handed on to: a refusal found is one the node meets when that line runs."""

import ast

from .crossing_types import kind_of

# Uses that the kind lists but that fail isolated (docs/PACKS.md, "Not bridged yet"): per
# type, the attribute read, or upstream's node class the method hands the object to.
NOT_BRIDGED = {"UPSCALE_MODEL": {"attribute": "model", "node": "ImageUpscaleWithModel",
                                 "why": "upstream's upscale reads the model's torch module (.model), which is not "
                                        "mirrored"}}


def _names_used(function_node):
    return {node.id for node in ast.walk(function_node) if isinstance(node, ast.Name)} | \
        {node.attr for node in ast.walk(function_node) if isinstance(node, ast.Attribute)}


def refusals(function, inputs, crossings):
    """One line per use the worker refuses of a remote-object input of `function` (a
    PackFunction), for inputs {name: type} whose crossing (crossing_types.classify) is given."""
    if function is None:
        return []
    node, found = function.node, []
    parameters = {a.arg for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs}
    where = function.module.where
    for name, type_value in inputs.items():
        crossing = crossings[name]
        if crossing.how != "remote" or name not in parameters:
            continue
        kind = kind_of(crossing.type)
        if kind is None:
            continue
        allowed = kind.calls | kind.reads | kind.writes
        blocked = NOT_BRIDGED.get(crossing.type)
        for use in ast.walk(node):
            attribute = use.attr if isinstance(use, ast.Attribute) and isinstance(use.value, ast.Name) \
                and use.value.id == name else None
            if attribute is None and isinstance(use, ast.Call) and isinstance(use.func, ast.Name) \
                    and use.func.id == name:
                attribute = "__call__"
            if attribute is None:
                continue
            if blocked and attribute == blocked["attribute"]:
                found.append(f"{where}:{use.lineno}: reads .{attribute} of ComfyUI's {crossing.type}: "
                             f"{blocked['why']}")
            elif attribute not in allowed:
                found.append(f"{where}:{use.lineno}: uses .{attribute} of ComfyUI's {crossing.type}, which "
                             f"crossing/kinds.py does not list for its kind {kind.name}: refused in the worker")
        if blocked and blocked["node"] in _names_used(node):
            found.append(f"{where}: hands ComfyUI's {crossing.type} to upstream's {blocked['node']}: "
                         f"{blocked['why']}")
    return list(dict.fromkeys(found))
