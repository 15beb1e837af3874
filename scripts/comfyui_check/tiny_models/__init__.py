"""comfyui-check's tiny models: a ComfyUI custom node that makes a MODEL, CLIP, VAE,
CONTROL_NET and CLIP_VISION with ComfyUI's own classes and loaders, for the remote
objects' steps (scripts/comfyui_check/remote_steps.py). There are no checkpoints here, so
each model's weights are drawn from a seeded generator (the same seed, the same weights,
in any process) and handed to upstream's own loading code:

- MODEL: an SD1-shaped UNet (upstream's UNetModel, one level, 320 channels, a 768-wide
  context, so that upstream's model detection names it SD15) loaded by
  comfy.sd.load_diffusion_model_state_dict; the same weights are also written as a
  checkpoint, whose path is the node's STRING output, for a pack's own loader
  (comfy.sd.load_checkpoint_guess_config) to load in its worker;
- CLIP: comfy.sd.CLIP over upstream's SD1ClipModel and SD1Tokenizer, as upstream's loader
  builds an SD1 checkpoint's, with a one-layer text model (its configuration as the text
  encoder's model options) and, where transformers is not installed, a word tokenizer
  (clip_tokenizer.py) as its CLIPTokenizer;
- VAE: comfy.sd.VAE with a small AutoencoderKL configuration;
- CONTROL_NET: comfy.controlnet.load_controlnet_state_dict over an SD1-shaped ControlNet
  of the UNet's shape;
- CLIP_VISION (ComfySupervisorCheckTinyClipVision, a node of its own): upstream's
  comfy.clip_vision.ClipVisionModel over a small CLIP vision configuration (two layers,
  64 wide, 224-pixel images in 32-pixel patches), with its load_sd.

ComfySupervisorCheckSdVae (sd_vae.py) makes SD1's VAE as a checkpoint's loaders do.
ComfySupervisorCheckNoise makes a seeded IMAGE; ComfySupervisorCheckDigest (an output node)
shows the SHA-256 of each tensor's bytes, with its dtype and shape, of a LATENT, IMAGE or
CONDITIONING, so that the check compares two graphs' outputs bit for bit. GET
/comfyui_check/tiny_models says what the loader built (the UNet's size, for the ledger).
"""

import hashlib
import json
import os

import comfy.cldm.cldm
import comfy.clip_vision
import comfy.controlnet
import comfy.sd
import comfy.sd1_clip
import comfy.supported_models_base
import folder_paths
import server
import torch
from aiohttp import web
from comfy.ldm.models.autoencoder import AutoencoderKL
from comfy.ldm.modules.diffusionmodules.openaimodel import UNetModel

CATEGORY = "comfy-supervisor check"
UNET = dict(image_size=32, in_channels=4, out_channels=4, model_channels=320, num_res_blocks=[1], channel_mult=[1],
            transformer_depth=[1], transformer_depth_middle=1, transformer_depth_output=[1, 1], context_dim=768,
            num_heads=8, num_head_channels=-1, use_spatial_transformer=True, use_linear_in_transformer=False,
            legacy=False, adm_in_channels=None, use_temporal_attention=False)
TEXT = {"num_hidden_layers": 1, "hidden_size": 768, "num_attention_heads": 8, "intermediate_size": 1024,
        "hidden_act": "quick_gelu", "max_position_embeddings": 77, "eos_token_id": 49407, "projection_dim": 768}
VAE = {"params": {"embed_dim": 4, "ddconfig": {"double_z": True, "z_channels": 4, "resolution": 64, "in_channels": 3,
                                               "out_ch": 3, "ch": 32, "ch_mult": [1, 2, 2, 2], "num_res_blocks": 1,
                                               "attn_resolutions": [], "dropout": 0.0}}}
# Two layers, not one: a pack's node reads the penultimate layer's output (intermediate_output=-2), which
# upstream's CLIPEncoder gives none of with one layer.
CLIP_VISION = {"model_type": "clip_vision_model", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
               "intermediate_size": 128, "image_size": 224, "patch_size": 32, "num_channels": 3, "projection_dim": 32,
               "hidden_act": "quick_gelu", "layer_norm_eps": 1e-5}
BUILT = {}  # what the last load built, for the route


def seeded(module, generator, scale=0.05):
    """`module`'s state dict with every floating tensor drawn from `generator`, in key order."""
    out = {}
    for key, value in sorted(module.state_dict().items()):
        if value.is_floating_point():
            out[key] = (torch.randn(value.shape, generator=generator, dtype=torch.float32) * scale).to(value.dtype)
        else:
            out[key] = value.clone()
    return out


def build_clip(generator):
    """As upstream's checkpoint loader builds an SD1 checkpoint's CLIP: its ClipTarget of
    upstream's SD1Tokenizer and SD1ClipModel, the text model's configuration given as the
    text encoder's model options (clip_l_model_config)."""
    target = comfy.supported_models_base.ClipTarget(comfy.sd1_clip.SD1Tokenizer, comfy.sd1_clip.SD1ClipModel)
    clip = comfy.sd.CLIP(target, model_options={"dtype": torch.float32, "clip_l_model_config": dict(TEXT)})
    clip.load_sd(seeded(clip.cond_stage_model, generator), full_model=True)
    return clip


def build_vae(generator):
    return comfy.sd.VAE(sd=seeded(AutoencoderKL(**VAE["params"]), generator), config=VAE, dtype=torch.float32)


def build_control(generator):
    shape = {k: v for k, v in UNET.items() if k not in ("out_channels", "transformer_depth_output")}
    return comfy.controlnet.load_controlnet_state_dict(seeded(comfy.cldm.cldm.ControlNet(hint_channels=3, **shape),
                                                              generator))


def build_clip_vision(seed):
    """Upstream's ClipVisionModel takes its configuration as a file's path only, so it is
    written to ComfyUI's temp folder first (the check's own, removed with it). The file
    stays while the model lives, as upstream's own configuration files do."""
    config = os.path.join(folder_paths.get_temp_directory(), f"comfyui-check-tiny-clip-vision-{seed}.json")
    os.makedirs(os.path.dirname(config), exist_ok=True)
    with open(config, "w") as file:
        json.dump(CLIP_VISION, file)
    clip_vision = comfy.clip_vision.ClipVisionModel(config)
    clip_vision.load_sd(seeded(clip_vision.model, torch.Generator().manual_seed(seed)))
    return clip_vision


class ComfySupervisorCheckTinyModels:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"seed": ("INT", {"default": 1, "min": 0, "max": 2**31 - 1})}}

    RETURN_TYPES = ("MODEL", "CLIP", "VAE", "CONTROL_NET", "STRING")
    RETURN_NAMES = ("model", "clip", "vae", "control_net", "checkpoint")
    FUNCTION = "load"
    CATEGORY = CATEGORY

    def load(self, seed):
        generator = torch.Generator().manual_seed(seed)
        unet = seeded(UNetModel(dtype=torch.float32, device="cpu", **UNET), generator)
        checkpoint = os.path.join(folder_paths.get_temp_directory(), f"comfyui-check-tiny-sd1-{seed}.ckpt")
        os.makedirs(os.path.dirname(checkpoint), exist_ok=True)
        torch.save({"model.diffusion_model." + key: value for key, value in unet.items()}, checkpoint)
        model = comfy.sd.load_diffusion_model_state_dict(dict(unet))
        clip, vae, control = build_clip(generator), build_vae(generator), build_control(generator)
        BUILT.update(seed=seed, model_bytes=model.model_size(), checkpoint=checkpoint)
        return (model, clip, vae, control, checkpoint)


class ComfySupervisorCheckTinyClipVision:
    """A node of its own, not another output of ComfySupervisorCheckTinyModels: the steps
    that do not use a CLIP_VISION do not build one."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"seed": ("INT", {"default": 1, "min": 0, "max": 2**31 - 1})}}

    RETURN_TYPES = ("CLIP_VISION",)
    RETURN_NAMES = ("clip_vision",)
    FUNCTION = "load"
    CATEGORY = CATEGORY

    def load(self, seed):
        return (build_clip_vision(seed),)


class ComfySupervisorCheckNoise:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"seed": ("INT", {"default": 1, "min": 0, "max": 2**31 - 1}),
                             "width": ("INT", {"default": 64}), "height": ("INT", {"default": 64})}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "make"
    CATEGORY = CATEGORY

    def make(self, seed, width, height):
        return (torch.rand(1, height, width, 3, generator=torch.Generator().manual_seed(seed)),)


def digest(tensor):
    tensor = tensor.detach().to("cpu").contiguous()
    data = tensor.view(torch.uint8) if tensor.dim() else tensor.reshape(1).view(torch.uint8)
    return {"sha256": hashlib.sha256(data.numpy().tobytes()).hexdigest(), "dtype": str(tensor.dtype),
            "shape": list(tensor.shape), "finite": bool(torch.isfinite(tensor).all()),
            "mean_abs": float(tensor.float().abs().mean()) if tensor.numel() else 0.0}


class ComfySupervisorCheckDigest:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"label": ("STRING", {"default": ""})},
                "optional": {"latent": ("LATENT",), "image": ("IMAGE",), "conditioning": ("CONDITIONING",)}}

    RETURN_TYPES = ()
    FUNCTION = "show"
    OUTPUT_NODE = True
    CATEGORY = CATEGORY

    def show(self, label, latent=None, image=None, conditioning=None):
        tensors = []
        if latent is not None:
            tensors.append(("samples", latent["samples"]))
        if image is not None:
            tensors.append(("image", image))
        for number, (cond, extra) in enumerate(conditioning or ()):
            tensors.append((f"cond{number}", cond))
            if extra.get("pooled_output") is not None:
                tensors.append((f"pooled{number}", extra["pooled_output"]))
        return {"ui": {"digests": [{"label": label, "name": name, **digest(t)} for name, t in tensors]}}


@server.PromptServer.instance.routes.get("/comfyui_check/tiny_models")
async def tiny_models(request):
    return web.json_response(BUILT)


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (ComfySupervisorCheckTinyModels, ComfySupervisorCheckTinyClipVision,
                                                      ComfySupervisorCheckNoise, ComfySupervisorCheckDigest)}

from .sd_vae import NODE_CLASS_MAPPINGS as _SD_VAE  # noqa: E402 (SD1's VAE as a checkpoint's loaders make it)
NODE_CLASS_MAPPINGS.update(_SD_VAE)
