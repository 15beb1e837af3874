"""An IPAdapter model for the tiny models (tiny_models/), drawn from a seed: what
IPAdapter_plus's IPAdapterModelLoader reads from ComfyUI's ipadapter folder in its step.

The plain (not "plus") SD1 form IPAdapter_plus's loader reads from a `.pt` file:
`image_proj` (proj: the CLIP vision's image embeds to CONTEXT_TOKENS tokens of the UNet's
context width, then a LayerNorm) and `ip_adapter`, a key and a value projection per
cross-attention it patches ("1.to_k_ip.weight" ... "31.to_v_ip.weight": SD1's 16, input
6, output 9, middle 1, numbered 1, 3, 5, ...), each from the context width to the UNet's
width at that block: the tiny UNet is 320 wide at every block. Written before ComfyUI
starts, so that the loader's file list (its combo input) holds it in both processes.
"""

import os

CONTEXT = 768          # tiny_models' UNET context_dim: the width of the tokens the adapter adds
INNER = 320            # tiny_models' UNET model_channels: every block's width in the one-level UNet
IMAGE_EMBEDS = 32      # tiny_models' CLIP_VISION projection_dim: the image embeds' width
CONTEXT_TOKENS = 4
ATTENTIONS = 16        # SD1's cross-attentions, as IPAdapter_plus numbers them
SCALE = 0.05


def write_ipadapter(path, seed):
    import torch  # the check's interpreter runs ComfyUI, so it has torch; only this step needs it

    generator = torch.Generator().manual_seed(seed)

    def drawn(*shape):
        return torch.randn(*shape, generator=generator) * SCALE
    image_proj = {"proj.weight": drawn(CONTEXT_TOKENS * CONTEXT, IMAGE_EMBEDS), "proj.bias": drawn(CONTEXT_TOKENS * CONTEXT),
                  "norm.weight": 1 + drawn(CONTEXT), "norm.bias": drawn(CONTEXT)}
    ip_adapter = {}
    for number in range(ATTENTIONS):
        for projection in ("to_k_ip", "to_v_ip"):
            ip_adapter[f"{number * 2 + 1}.{projection}.weight"] = drawn(INNER, CONTEXT)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save({"image_proj": image_proj, "ip_adapter": ip_adapter}, path)
