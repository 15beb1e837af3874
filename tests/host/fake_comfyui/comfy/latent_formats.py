"""Our model of upstream's comfy/latent_formats.py: a latent format scales latents in and out."""


class LatentFormat:
    scale_factor = 1.0
    latent_channels = 4
    latent_dimensions = 2

    def process_in(self, latent):
        return latent * self.scale_factor

    def process_out(self, latent):
        return latent / self.scale_factor


class SD15(LatentFormat):
    scale_factor = 0.18215
