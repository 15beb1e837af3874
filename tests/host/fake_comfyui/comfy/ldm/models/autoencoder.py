"""Our model of upstream's comfy/ldm/models/autoencoder.py: AutoencoderKL, the class of a
VAE's first stage model upstream's comfy.sd.VAE builds (here small: a strided convolution
each way, embed_dim latent channels)."""

import torch


class AutoencoderKL(torch.nn.Module):
    def __init__(self, embed_dim=4):
        super().__init__()
        self.encoder = torch.nn.Conv2d(3, embed_dim, kernel_size=8, stride=8)
        self.decoder = torch.nn.ConvTranspose2d(embed_dim, 3, kernel_size=8, stride=8)
