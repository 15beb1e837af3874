"""Our model of upstream's comfy/ldm/modules/diffusionmodules/openaimodel.py: UNetModel, the
class upstream's BaseModel builds its diffusion model from, as upstream builds it:
UNetModel(**model_config.unet_config, device=..., operations=...). Here it is the small
model of comfy/model_base.py (TinyUNet); its layers are torch's own, so `operations` is
taken and not used, and `device` is where its layers make their tensors (on the meta
device: shapes, no memory, as upstream's)."""

from comfy.model_base import TinyUNet


class UNetModel(TinyUNet):
    def __init__(self, channels=4, dim=32, context_dim=16, heads=4, device=None, operations=None, dtype=None):
        super().__init__(channels=channels, dim=dim, context_dim=context_dim, heads=heads, device=device)
