"""A pack's nodes of ComfyUI's newer node API (comfy_api's io.ComfyNode, "V3"), run in its
worker behind the host's proxy, which is a node of the older API (docs/PACKS.md, "Nodes of
ComfyUI's newer API").

A V3 class answers the older API's questions itself (INPUT_TYPES, RETURN_TYPES, FUNCTION
and the rest are its class properties), so its interface is described as any node's,
but for what upstream's execution does otherwise for it, done here as execution.py does it:

- hidden inputs: the class lists them as name -> (kind,), and so does the proxy, whose
  (kind,) is also equal to the kind's name (host/socket_types.HiddenKind), so that the
  host's execution passes each (PROMPT, UNIQUE_ID, EXTRA_PNGINFO...); here they go to a
  clone of the class (PREPARE_CLASS_CLONE) rather than to the call;
- its display name is its schema's, None where it gives none, as upstream shows it;
- IS_CHANGED and VALIDATE_INPUTS are its fingerprint_inputs and validate_inputs, where the
  class overrides them, and its check_lazy_status is asked as an older node's is;
- each call runs on a locked clone of the class, as upstream's make_locked_method_func
  runs it, awaited where execute is a coroutine; its NodeOutput is given back in the older
  API's form ({"ui", "result", "expand"}).

A pack may list its V3 classes in NODE_CLASS_MAPPINGS, or give them only through
comfy_entrypoint() (a ComfyExtension): node_classes() reads both, as upstream's loader does.
"""

import asyncio
import functools
import inspect

# The older API's kind of call -> the V3 method that answers it.
_METHODS = {"is_changed": "fingerprint_inputs", "validate_inputs": "validate_inputs",
            "check_lazy_status": "check_lazy_status"}


def is_v3(cls):
    internal = _internal()
    return internal is not None and isinstance(cls, type) and issubclass(cls, internal._ComfyNodeInternal)


@functools.cache
def _internal():
    """Looked for once, after the pack's import: a failed import searches the whole path,
    which every node call would pay."""
    try:
        import comfy_api.internal
    except ImportError:
        return None  # a ComfyUI without the newer API: no pack's class can be of it
    return comfy_api.internal


def overrides(cls, name):
    """The class's own `name` (fingerprint_inputs, validate_inputs), or None."""
    return _internal().first_real_override(cls, name)


def node_classes(module):
    """NODE_CLASS_MAPPINGS and NODE_DISPLAY_NAME_MAPPINGS of a pack's module: its own, or
    those of the nodes its comfy_entrypoint()'s extension lists, by their schemas' ids.
    None when it has neither. A listed class whose schema raises fails the import whole, as
    upstream's loader refuses such an extension whole (a class of NODE_CLASS_MAPPINGS is
    left out alone: __main__.describe)."""
    classes = getattr(module, "NODE_CLASS_MAPPINGS", None)
    if isinstance(classes, dict):
        return classes, getattr(module, "NODE_DISPLAY_NAME_MAPPINGS", None) or {}
    entrypoint = getattr(module, "comfy_entrypoint", None)
    if not callable(entrypoint):
        return None

    async def listed():
        extension = await entrypoint() if inspect.iscoroutinefunction(entrypoint) else entrypoint()
        return await extension.get_node_list()

    classes, names = {}, {}
    for cls in asyncio.run(listed()):
        schema = cls.GET_SCHEMA()
        classes[schema.node_id] = cls
        if schema.display_name is not None:
            names[schema.node_id] = schema.display_name
    return classes, names


def call(cls, kind, inputs):
    """The node's `kind` of call (function, is_changed, validate_inputs) with `inputs`, the
    hidden ones among them taken out for the class's clone."""
    from comfy_api.latest import io
    _, schema = cls.INPUT_TYPES(include_hidden=False, return_schema=True)
    hidden = {kind_: inputs.pop(kind_.name) for kind_ in schema.hidden or () if kind_.name in inputs}
    clone = cls.PREPARE_CLASS_CLONE(hidden)
    run = _internal().make_locked_method_func(cls, _METHODS.get(kind, cls.FUNCTION), clone)
    result = run(**inputs)
    if inspect.iscoroutine(result):
        result = asyncio.run(result)
    return older_form(result, io.NodeOutput, len(cls.RETURN_TYPES)) if kind == "function" else result


def older_form(output, node_output, outputs):
    """A NodeOutput as the older API returns it: {"ui", "result", "expand"}, each only where
    there is one; one that blocks execution as upstream's execution makes it, an
    ExecutionBlocker for each of its `outputs` (which crosses by value)."""
    if not isinstance(output, node_output):
        return output
    result = output.result
    if output.block_execution is not None:
        from comfy_execution.graph_utils import ExecutionBlocker
        result = tuple([ExecutionBlocker(output.block_execution)] * outputs)
    returned = {}
    if output.ui is not None:
        returned["ui"] = output.ui if isinstance(output.ui, dict) else output.ui.as_dict()
    if output.expand is not None:
        returned["expand"] = output.expand
    if result is not None or output.expand is not None:
        returned["result"] = result if result is not None else ()
    return returned
