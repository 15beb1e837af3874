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
ExitMidNode). Each node keeps the pack's display name, or its own name where the pack
gives none, as the isolated pack's proxy does: the two differ in their names only.
"""

import importlib.util
import json
import os

_FOLDER = os.path.basename(os.path.dirname(os.path.abspath(__file__)))


def _load(folder):
    spec = importlib.util.spec_from_file_location(f"comfyui_check_one_process_{_FOLDER}",
                                                  os.path.join(folder, "__init__.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_path, _prefix = json.loads(os.environ["COMFYUI_CHECK_ONE_PROCESS_PACKS"])[_FOLDER]
_pack = _load(_path)
_names = getattr(_pack, "NODE_DISPLAY_NAME_MAPPINGS", None) or {}
NODE_CLASS_MAPPINGS = {_prefix + name: cls for name, cls in _pack.NODE_CLASS_MAPPINGS.items()}
NODE_DISPLAY_NAME_MAPPINGS = {_prefix + name: _names.get(name, name) for name in _pack.NODE_CLASS_MAPPINGS}
