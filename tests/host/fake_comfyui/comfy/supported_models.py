"""Our model of upstream's comfy/supported_models.py: a model configuration, what its loader
detected a checkpoint to be. As upstream's (supported_models_base.BASE), it is built from
the diffusion model's unet_config and keeps its latent format (an instance), the dtype it
casts to, its operations and optimizations, which a model built from it reads."""

from . import latent_formats


class SD15:
    latent_format = latent_formats.SD15

    def __init__(self, unet_config):
        self.unet_config = dict(unet_config)
        self.latent_format = self.latent_format()
        self.manual_cast_dtype = None
        self.custom_operations = None
        self.optimizations = {"fp8": False}
        self.scaled_fp8 = None
