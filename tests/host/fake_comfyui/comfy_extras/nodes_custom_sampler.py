"""Our model of upstream's comfy_extras/nodes_custom_sampler.py, as far as NOISE goes: the two
noise sources upstream's custom sampling nodes make (Noise_EmptyNoise, Noise_RandomNoise:
a seed, and generate_noise of a LATENT through comfy.sample.prepare_noise) and the nodes
that make them (DisableNoise, RandomNoise), with upstream's names and signatures."""

import comfy.sample
import torch


class Noise_EmptyNoise:
    def __init__(self):
        self.seed = 0

    def generate_noise(self, input_latent):
        latent_image = input_latent["samples"]
        return torch.zeros(latent_image.shape, dtype=latent_image.dtype, layout=latent_image.layout, device="cpu")


class Noise_RandomNoise:
    def __init__(self, seed):
        self.seed = seed

    def generate_noise(self, input_latent):
        latent_image = input_latent["samples"]
        return comfy.sample.prepare_noise(latent_image, self.seed, input_latent.get("batch_index"))


class DisableNoise:
    FUNCTION = "get_noise"
    RETURN_TYPES = ("NOISE",)

    def get_noise(self):
        return (Noise_EmptyNoise(),)


class RandomNoise:
    FUNCTION = "get_noise"
    RETURN_TYPES = ("NOISE",)

    def get_noise(self, noise_seed):
        return (Noise_RandomNoise(noise_seed),)
