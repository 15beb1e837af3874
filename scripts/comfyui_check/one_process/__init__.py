"""comfyui-check's one-process copy of a pack: a ComfyUI custom node that imports the pack
named by COMFYUI_CHECK_ONE_PROCESS_PACK (tests/packs/model_pack) into ComfyUI's own process,
as a user who installs it as an ordinary custom node has it, and registers each of its
nodes under the prefix "OneProcess". The same pack also runs isolated in its own worker
under its own names, so one prompt holds both graphs, and the check compares their
outputs bit for bit (scripts/comfyui_check/remote_steps.py).
"""

import importlib.util
import os

PREFIX = "OneProcess"


def _load(folder):
    spec = importlib.util.spec_from_file_location("comfyui_check_one_process_pack", os.path.join(folder, "__init__.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_pack = _load(os.environ["COMFYUI_CHECK_ONE_PROCESS_PACK"])
NODE_CLASS_MAPPINGS = {PREFIX + name: cls for name, cls in _pack.NODE_CLASS_MAPPINGS.items()}
NODE_DISPLAY_NAME_MAPPINGS = {PREFIX + name: f"{name} (one process)" for name in _pack.NODE_CLASS_MAPPINGS}
