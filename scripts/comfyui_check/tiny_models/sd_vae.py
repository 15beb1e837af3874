"""comfyui-check's SD1 VAE (ComfySupervisorCheckSdVae): the VAE a checkpoint of SD1 gives,
as ComfyUI's checkpoint and VAE loaders make it: upstream's comfy.sd.VAE(sd=...) given the
VAE's weights alone, from whose keys and shapes it detects SD's AutoencoderKL itself (no
config). Full size (SD's 83 M parameters), its weights drawn from a seed in key order, as
the tiny models' are (there are no checkpoints here)."""

import comfy.sd
import torch
from comfy.ldm.models.autoencoder import AutoencoderKL

# The shape upstream's VAE gives a VAE it detects as SD's (comfy/sd.py, VAE.__init__), here
# only to name the weights' keys and shapes.
SD_DDCONFIG = {"double_z": True, "z_channels": 4, "resolution": 256, "in_channels": 3, "out_ch": 3, "ch": 128,
               "ch_mult": [1, 2, 4, 4], "num_res_blocks": 2, "attn_resolutions": [], "dropout": 0.0}


def seeded_sd_vae_weights(seed):
    """SD1's VAE weights as a checkpoint holds them (without its first_stage_model. prefix)."""
    generator = torch.Generator().manual_seed(seed)
    shapes = AutoencoderKL(ddconfig=SD_DDCONFIG, embed_dim=4).state_dict()
    return {key: torch.randn(value.shape, generator=generator) * 0.02 for key, value in sorted(shapes.items())}


class ComfySupervisorCheckSdVae:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"seed": ("INT", {"default": 1, "min": 0, "max": 2**31 - 1})}}

    RETURN_TYPES = ("VAE",)
    FUNCTION = "load"
    CATEGORY = "comfy-supervisor check"

    def load(self, seed):
        return (comfy.sd.VAE(sd=seeded_sd_vae_weights(seed)),)


NODE_CLASS_MAPPINGS = {"ComfySupervisorCheckSdVae": ComfySupervisorCheckSdVae}
