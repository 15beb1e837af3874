"""comfyui-check's one-process copy of a pack: a ComfyUI custom node that imports a pack
into ComfyUI's own process, as a user who installs it as an ordinary custom node has it,
and registers each of its nodes under a prefix. The same pack also runs isolated in its
own worker under its own names, so one prompt holds both graphs, and the check compares
their outputs bit for bit (scripts/comfyui_check/remote_steps.py) and their node info
(check.py's step 14).

The check copies this folder into custom_nodes once per pack, and
COMFYUI_CHECK_ONE_PROCESS_PACKS (JSON) names, for the name of each copy's folder, the
pack's folder and the prefix: tests/packs/model_pack as comfyui_check_one_process/, its
nodes "OneProcess" + name; tests/packs/bridge_pack as bridge_pack/, the pack's own folder
name, so that upstream gives its classes the python_module a user's install gives them
(custom_nodes.bridge_pack), its nodes "OneProcessBridge" + name (both packs have an
ExitMidNode); and tests/packs/v3_pack as v3_pack/, its comfy_api nodes renamed
"OneProcessV3" + node id in their schemas; and each real pack of --real-packs
(real_pack_steps.py) as comfyui_check_real_KEY/, its nodes its step's prefix + name. Each node keeps the pack's display name, or its own name where the pack
gives none, as the isolated pack's proxy does: the two differ in their names only.
"""

import importlib.util
import json
import os
import sys

_FOLDER = os.path.basename(os.path.dirname(os.path.abspath(__file__)))


def _load(folder):
    """The pack at `folder` imported as a package of its own name here, so that its relative
    imports (`from .nodes import ...`, as real packs write them) find its modules; imported
    once, however often ComfyUI loads this copy, so that nothing of the pack runs twice."""
    name = f"comfyui_check_one_process_{_FOLDER}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(folder, "__init__.py"),
                                                  submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _awaited(coroutine):
    """A coroutine's result, run here to its end: a pack's comfy_entrypoint and its node list
    await nothing real, and upstream's loader is mid-way through its own event loop."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise RuntimeError("the pack's comfy_entrypoint awaits something: this copy cannot run it")


def _renamed(cls, prefix):
    """A comfy_api node class whose schema's node_id has `prefix`: its copy's id."""
    class Renamed(cls):
        @classmethod
        def define_schema(renamed):
            schema = cls.define_schema()
            schema.node_id = prefix + schema.node_id
            return schema
    Renamed.__name__ = cls.__name__
    return Renamed


def _node_classes(pack, prefix):
    """The pack's classes by their copies' names, and the names upstream shows: from its
    NODE_CLASS_MAPPINGS, or its comfy_entrypoint's extension (comfy_api nodes)."""
    if isinstance(getattr(pack, "NODE_CLASS_MAPPINGS", None), dict):
        names = getattr(pack, "NODE_DISPLAY_NAME_MAPPINGS", None) or {}
        return ({prefix + name: cls for name, cls in pack.NODE_CLASS_MAPPINGS.items()},
                {prefix + name: names.get(name, name) for name in pack.NODE_CLASS_MAPPINGS})
    classes, names = {}, {}
    for cls in _awaited(_awaited(pack.comfy_entrypoint()).get_node_list()):
        schema = cls.GET_SCHEMA()
        classes[prefix + schema.node_id] = _renamed(cls, prefix)
        names[prefix + schema.node_id] = schema.display_name or schema.node_id
    return classes, names


_path, _prefix = json.loads(os.environ["COMFYUI_CHECK_ONE_PROCESS_PACKS"])[_FOLDER]
NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS = _node_classes(_load(_path), _prefix)
