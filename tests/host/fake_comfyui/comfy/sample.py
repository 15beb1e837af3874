"""Our model of upstream's comfy/sample.py: prepare_noise, and sample as KSampler calls it:
the model loaded through comfy.model_management.load_models_gpu, the conditionings made
model conditionings, the latent processed in and out by the model's latent format."""

import torch

import comfy.model_management
import comfy.samplers


def prepare_noise(latent_image, seed, noise_inds=None):
    generator = torch.manual_seed(seed)
    return torch.randn(latent_image.size(), dtype=latent_image.dtype, layout=latent_image.layout,
                       generator=generator, device="cpu")


def convert_cond(cond):
    out = []
    for embedding, extra in cond:
        c = dict(extra)
        c["model_conds"] = dict(c.get("model_conds", {}))  # what a pack put there, beside the model's
        c["cross_attn"] = embedding
        out.append(c)
    return out


def sample(model, noise, steps, cfg, sampler_name, scheduler, positive, negative, latent_image, denoise=1.0,
           disable_noise=False, start_step=None, last_step=None, force_full_denoise=False, noise_mask=None,
           sigmas=None, callback=None, disable_pbar=False, seed=None):
    comfy.model_management.load_models_gpu([model])
    real_model = model.model
    sigmas = comfy.samplers.calculate_sigmas(model.get_model_object("model_sampling"), steps)
    latent = real_model.process_latent_in(latent_image)
    samples = comfy.samplers.sample(model, noise, convert_cond(positive), convert_cond(negative), cfg, sigmas, latent)
    return real_model.process_latent_out(samples)
