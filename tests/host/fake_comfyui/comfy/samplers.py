"""Our model of upstream's comfy/samplers.py, as far as a sampling step reaches a model and
what packs patched into it: encode_model_conds (the model's extra_conds make each
conditioning's comfy.conds values, once a run), sampling_function, calc_cond_batch (each
cond's values batched, its control net asked for its residuals, the model's apply_model
called with them and the transformer options),
cfg_function (the model's sampler_cfg_function and post-CFG functions called with
upstream's arguments), and an Euler sampler over the model's sigmas."""

import math

import torch


def calc_cond_batch(model, conds, x_in, timestep, model_options):
    out = []
    for cond in conds:
        if cond is None:
            out.append(None)
            continue
        total = torch.zeros_like(x_in)
        for c in cond:
            transformer_options = model_options["transformer_options"].copy()
            transformer_options["sigmas"] = timestep
            batched = {k: v.process_cond(batch_size=x_in.shape[0], area=None).concat([])
                       for k, v in c["model_conds"].items()}
            control = c.get("control")
            residuals = control.get_control(x_in, timestep, batched, 1, transformer_options) \
                if control is not None else None
            total = total + model.apply_model(x_in, timestep, **batched, control=residuals,
                                              transformer_options=transformer_options)
        out.append(total / len(cond))
    return out


def cfg_function(model, cond_pred, uncond_pred, cond_scale, x, timestep, model_options={}, cond=None, uncond=None):
    if "sampler_cfg_function" in model_options:
        args = {"cond": x - cond_pred, "uncond": x - uncond_pred, "cond_scale": cond_scale, "timestep": timestep,
                "input": x, "sigma": timestep, "cond_denoised": cond_pred, "uncond_denoised": uncond_pred,
                "model": model, "model_options": model_options, "input_cond": cond, "input_uncond": uncond}
        cfg_result = x - model_options["sampler_cfg_function"](args)
    else:
        cfg_result = uncond_pred + (cond_pred - uncond_pred) * cond_scale
    for fn in model_options.get("sampler_post_cfg_function", []):
        args = {"denoised": cfg_result, "cond": cond, "uncond": uncond, "cond_scale": cond_scale, "model": model,
                "uncond_denoised": uncond_pred, "cond_denoised": cond_pred, "sigma": timestep,
                "model_options": model_options, "input": x}
        cfg_result = fn(args)
    return cfg_result


def sampling_function(model, x, timestep, uncond, cond, cond_scale, model_options={}, seed=None):
    if math.isclose(cond_scale, 1.0) and not model_options.get("disable_cfg1_optimization", False):
        uncond_ = None
    else:
        uncond_ = uncond
    out = calc_cond_batch(model, [cond, uncond_], x, timestep, model_options)
    if out[1] is None:
        return out[0]
    return cfg_function(model, out[0], out[1], cond_scale, x, timestep, model_options=model_options, cond=cond,
                        uncond=uncond_)


def encode_model_conds(model_function, conds, noise, device):
    """Each conditioning's model_conds joined by what the model makes of it (upstream's
    extra_conds: comfy.conds values), given the whole conditioning, the noise and the device."""
    out = []
    for x in conds:
        params = x.copy()
        params["device"], params["noise"] = device, noise
        params["width"], params["height"] = noise.shape[3] * 8, noise.shape[2] * 8
        x = x.copy()
        x["model_conds"] = {**x["model_conds"], **model_function(**params)}
        out.append(x)
    return out


def calculate_sigmas(model_sampling, steps):
    """Upstream's "normal" scheduler."""
    start, end = model_sampling.timestep(model_sampling.sigma_max), model_sampling.timestep(model_sampling.sigma_min)
    timesteps = torch.linspace(start, end, steps)
    sigmas = [float(model_sampling.sigma(ts)) for ts in timesteps]
    return torch.FloatTensor(sigmas + [0.0])


def sample(model_patcher, noise, positive, negative, cfg, sigmas, latent_image):
    """Euler, with the denoiser of sampling_function, over the patcher's model as its patches
    and object patches make it for the run."""
    model = model_patcher.patch_model()
    try:
        model_options = model_patcher.model_options
        positive = encode_model_conds(model.extra_conds, positive, noise, noise.device)
        negative = encode_model_conds(model.extra_conds, negative, noise, noise.device)
        x = model.model_sampling.noise_scaling(sigmas[0], noise, latent_image)
        for i in range(len(sigmas) - 1):
            sigma = sigmas[i] * x.new_ones([x.shape[0]])
            denoised = sampling_function(model, x, sigma, negative, positive, cfg, model_options=model_options)
            d = (x - denoised) / sigmas[i]
            x = x + d * (sigmas[i + 1] - sigmas[i])
        return model.model_sampling.inverse_noise_scaling(sigmas[-1], x)
    finally:
        model_patcher.unpatch_model()
