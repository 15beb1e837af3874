"""A LoRA for the tiny UNet (tiny_models/), drawn from a seed: what rgthree's Power Lora
Loader reads from ComfyUI's loras folder in its step. Nothing is downloaded; its shapes
come from the checkpoint tiny_models wrote, so it fits whatever UNet that node builds.

Written in the kohya form upstream's comfy.lora reads for a UNet: for each 2-D weight
`diffusion_model.X.weight`, `lora_unet_X'.lora_up.weight` (out x rank),
`.lora_down.weight` (rank x in) and `.alpha`, X' being X with its dots as underscores. A
`.pt` file, which upstream's load_torch_file reads with torch.load: Debian's Python has no
safetensors.
"""

import os

RANK = 4
SCALE = 0.05
PREFIX = "model.diffusion_model."


def write_lora(checkpoint, path, seed):
    """Writes the LoRA of the linear layers of the UNet in `checkpoint` to `path`; their count."""
    import torch  # the check's interpreter runs ComfyUI, so it has torch; only this step needs it

    weights = torch.load(checkpoint, map_location="cpu")
    generator = torch.Generator().manual_seed(seed)
    lora = {}
    for key in sorted(weights):
        value = weights[key]
        if not (key.startswith(PREFIX) and key.endswith(".weight") and value.dim() == 2):
            continue
        name = "lora_unet_" + key[len(PREFIX):-len(".weight")].replace(".", "_")
        out_features, in_features = value.shape
        lora[f"{name}.lora_up.weight"] = torch.randn(out_features, RANK, generator=generator) * SCALE
        lora[f"{name}.lora_down.weight"] = torch.randn(RANK, in_features, generator=generator) * SCALE
        lora[f"{name}.alpha"] = torch.tensor(float(RANK))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save(lora, path)
    return len(lora) // 3
