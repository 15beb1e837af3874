"""comfyui-check's model node: a ComfyUI custom node that loads a model of a known size.

scripts/comfyui-check copies this folder into the custom_nodes folder of the temporary
ComfyUI base directory it runs (--base-directory), never into the user's checkout. The
node "ComfySupervisorCheckModel" builds a torch nn.Module of `megabytes` MiB (bias-free
float32 Linear layers of 32 MiB each, so upstream's module_size() is exactly that), wraps
it in comfy.model_patcher.ModelPatcher with load_device = offload_device =
comfy.model_management.get_torch_device() (the CPU under --cpu) and loads it through
comfy.model_management.load_models_gpu, as ComfyUI's own loaders do: the call goes
through the module attribute, so the supervisor's wrap (admission, ledger) sees it. The
patcher is kept in a module global, so the entry stays in current_loaded_models (which
only holds weak references) until something unloads it.

It also serves GET /comfyui_check/loaded_models: ComfyUI's own current_loaded_models, read
only, so the check can show what ComfyUI holds beside what the ledger says.
"""

import comfy.model_management
import comfy.model_patcher
import server
import torch
from aiohttp import web

LAYER_BYTES = 32 * 1024 * 1024  # one Linear(4096, 2048) of float32, without bias
HELD = []  # the patchers loaded: alive as long as this process


def build_module(megabytes):
    """An nn.Module of exactly `megabytes` MiB of weights (a multiple of 32)."""
    layers = max(1, (megabytes * 1024 * 1024) // LAYER_BYTES)
    module = torch.nn.Sequential(*[torch.nn.Linear(4096, 2048, bias=False) for _ in range(layers)])
    module.requires_grad_(False)
    return module


class ComfySupervisorCheckModel:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"megabytes": ("INT", {"default": 256, "min": 32, "max": 65536, "step": 32}),
                             "nonce": ("INT", {"default": 0, "min": 0, "max": 2**31 - 1})}}

    RETURN_TYPES = ()
    FUNCTION = "load"
    OUTPUT_NODE = True
    CATEGORY = "comfy-supervisor"

    def load(self, megabytes, nonce):
        device = comfy.model_management.get_torch_device()
        patcher = comfy.model_patcher.ModelPatcher(build_module(megabytes), load_device=device, offload_device=device)
        comfy.model_management.load_models_gpu([patcher])
        HELD.append(patcher)
        print(f"comfyui-check model node: loaded {patcher.model_size()} bytes on {device} "
              f"({patcher.loaded_size()} loaded, {len(comfy.model_management.current_loaded_models)} "
              "entries in current_loaded_models)", flush=True)
        return {}


def describe(loaded):
    """One entry of current_loaded_models, as upstream's LoadedModel methods see it."""
    patcher = loaded.model
    entry = {"class": type(loaded).__name__, "device": str(loaded.device), "patcher": type(patcher).__name__}
    try:
        if patcher is not None:
            entry.update(module=type(patcher.model).__name__, size=loaded.model_memory(),
                         loaded=loaded.model_loaded_memory(), currently_used=bool(loaded.currently_used))
    except Exception as error:  # a stand-in that lacks what upstream would call
        entry["error"] = f"{type(error).__name__}: {error}"
    return entry


@server.PromptServer.instance.routes.get("/comfyui_check/loaded_models")
async def loaded_models(request):
    return web.json_response([describe(loaded) for loaded in list(comfy.model_management.current_loaded_models)])


NODE_CLASS_MAPPINGS = {"ComfySupervisorCheckModel": ComfySupervisorCheckModel}
NODE_DISPLAY_NAME_MAPPINGS = {"ComfySupervisorCheckModel": "comfy-supervisor check: load a model"}
