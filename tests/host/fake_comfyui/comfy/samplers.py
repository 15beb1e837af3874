"""Our model of upstream's comfy/samplers.py, as far as a sampling step reaches a model and
what packs patched into it: encode_model_conds (the model's extra_conds make each
conditioning's comfy.conds values, once a run), sampling_function, calc_cond_batch (the
conds that can run together batched into one call of the model as upstream batches them,
their control net asked for its residuals, the model's apply_model called with them and
the transformer options),
cfg_function (the model's sampler_cfg_function and post-CFG functions called with
upstream's arguments), and an Euler sampler over the model's sigmas."""

import math

import torch

from . import model_management


def can_concat_cond(c1, c2):
    """Whether two conds run in one call of the model, as upstream decides: the same input
    shape, the same control net (or none), and values that concatenate."""
    if c1["input_x"].shape != c2["input_x"].shape or c1["control"] is not c2["control"]:
        return False
    a, b = c1["conditioning"], c2["conditioning"]
    return a is b or (a.keys() == b.keys() and all(a[k].can_concat(b[k]) for k in a))


def calc_cond_batch(model, conds, x_in, timestep, model_options):
    """Upstream's batching: every cond's entries gathered, and those that can run together
    run in one call of the model while its memory allows, the uncond first, as upstream
    orders them (transformer_options' cond_or_uncond says which is which)."""
    out_conds = [torch.zeros_like(x_in) for _ in conds]
    out_counts = [torch.ones_like(x_in) * 1e-37 for _ in conds]
    to_run = []
    for i, cond in enumerate(conds):
        for c in cond or ():
            to_run.append(({"input_x": x_in, "mult": torch.ones_like(x_in), "control": c.get("control"),
                            "conditioning": {k: v.process_cond(batch_size=x_in.shape[0], area=None)
                                             for k, v in c["model_conds"].items()}}, i))
    while to_run:
        first = to_run[0][0]
        to_batch_temp = [x for x in range(len(to_run)) if can_concat_cond(to_run[x][0], first)]
        to_batch_temp.reverse()
        to_batch = to_batch_temp[:1]
        free_memory = model_management.get_free_memory(x_in.device)
        for i in range(1, len(to_batch_temp) + 1):
            batch_amount = to_batch_temp[:len(to_batch_temp) // i]
            input_shape = [len(batch_amount) * first["input_x"].shape[0]] + list(first["input_x"].shape)[1:]
            if model.memory_required(input_shape) * 1.5 < free_memory:
                to_batch = batch_amount
                break
        popped = [to_run.pop(x) for x in to_batch]
        cond_or_uncond = [i for _, i in popped]
        input_x = torch.cat([p["input_x"] for p, _ in popped])
        c = {k: v[0].concat(v[1:]) for k, v in _gathered([p["conditioning"] for p, _ in popped]).items()}
        timestep_ = torch.cat([timestep] * len(popped))
        transformer_options = model_options["transformer_options"].copy()
        transformer_options["cond_or_uncond"] = cond_or_uncond[:]
        transformer_options["sigmas"] = timestep
        control = popped[-1][0]["control"]
        residuals = control.get_control(input_x, timestep_, c, len(cond_or_uncond), transformer_options) \
            if control is not None else None
        output = model.apply_model(input_x, timestep_, **c, control=residuals,
                                   transformer_options=transformer_options).chunk(len(popped))
        for o, (p, i) in enumerate(popped):
            out_conds[i] += output[o] * p["mult"]
            out_counts[i] += p["mult"]
    return [None if cond is None else out_conds[i] / out_counts[i] for i, cond in enumerate(conds)]


def _gathered(conditionings):
    """Each key's values, in order, over the conditionings batched together."""
    out = {}
    for conditioning in conditionings:
        for k, v in conditioning.items():
            out.setdefault(k, []).append(v)
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
