"""A pack that counts, at import, on what ComfyUI's main.py has set up before it imports
custom nodes; it fails to import, naming what is missing, where the pack worker did not
set it up (comfy_supervisor.upstream.comfyui_startup)."""

import logging
import os

import folder_paths
import utils.extra_config  # the checkout's utils package, not comfy/utils.py
from server import PromptServer

missing = []
if os.environ.get("STARTUP_PACK_PRESTARTUP") != "ran":
    missing.append("its prestartup_script.py did not run first")
if not hasattr(utils.extra_config, "load_extra_path_config"):
    missing.append(f"utils is {utils.__file__}, not the checkout's package")
if PromptServer.instance is None or not hasattr(PromptServer.instance, "routes"):
    missing.append("PromptServer.instance has no routes")
if os.environ.get("STARTUP_PACK_MODELS") not in folder_paths.get_folder_paths("checkpoints"):
    missing.append(f"the checkpoints folders {folder_paths.get_folder_paths('checkpoints')} lack the extra config's")
if folder_paths.get_output_directory() != os.environ.get("STARTUP_PACK_OUTPUT"):
    missing.append(f"the output directory is {folder_paths.get_output_directory()}")
if missing:
    raise ImportError("ComfyUI's start-up is incomplete: " + "; ".join(missing))
logging.getLogger(__name__).info("startup_pack: imported with ComfyUI's start-up")


class Ready:
    """Where ComfyUI's flags put the outputs, as this worker's folder_paths has it."""
    CATEGORY = "comfy-supervisor tests"
    FUNCTION = "output_directory"
    RETURN_TYPES = ("STRING",)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    def output_directory(self):
        return (folder_paths.get_output_directory(),)


NODE_CLASS_MAPPINGS = {"Ready": Ready}
