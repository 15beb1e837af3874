"""Each real pack's prompts for comfyui-check (real_pack_steps.py), over the tiny models.

A pack's step is one or more parts, each one prompt holding the graph through the pack's
nodes twice, isolated (the nodes' own names, their proxies) and in one process (the
one-process copy's names: `prefix` + name), and the same graph without the pack's nodes.
A part names its digest nodes' pairs that must be bit-equal (isolated, one process) and
the pairs that must differ (isolated, without the pack): the pack's nodes did something.
Parts are separate prompts so that one node's failure does not hide another's result.

Small on purpose: 64 x 64 images (8 x 8 latents; the tiled sampler's smallest tile is 256
pixels, so its latent is 384 x 256), 3 steps, euler.
"""

from collections import namedtuple

from remote_steps import base, digest, ksampler, node

Part = namedtuple("Part", "label prompt pairs changed")
PAIRS = [("isolated", "one_process")]
CHANGED = [("isolated", "plain")]


def sides(prefix):
    """(id suffix, digest label, the pack node's class name) for the isolated and the one-process graph."""
    return (("iso", "isolated", lambda name: name), ("one", "one_process", lambda name: prefix + name))


def patched(label, prefix, chain):
    """A part where the pack's nodes `chain` [(class, inputs)...] patch the host's MODEL one
    after another and the host's KSampler samples the last one's MODEL."""
    prompt = base()
    for suffix, side, named in sides(prefix):
        model = ["tiny", 0]
        for index, (class_type, inputs) in enumerate(chain):
            prompt[f"p{index}_{suffix}"] = node(named(class_type), model=model, **inputs)
            model = [f"p{index}_{suffix}", 0]
        prompt[f"k_{suffix}"] = ksampler(model)
        prompt[side] = digest(side, latent=(f"k_{suffix}", 0))
    prompt.update({"k_plain": ksampler(("tiny", 0)), "plain": digest("plain", latent=("k_plain", 0))})
    return Part(label, prompt, PAIRS, CHANGED)


def freeu(prefix, context):
    # FreeU's block patches act on 1280- and 640-channel blocks: the tiny UNet's are 320 wide, so they run
    # (each block, each step) and change nothing; the post-CFG SHIFT after them is what changes the samples.
    freeu_inputs = dict(multiscale_mode="Default", multiscale_strength=1.0, slice_b1=640, slice_b2=320, b1=1.1,
                        b2=1.2, s1=0.9, s2=0.2)
    return [patched("WAS_FreeU, WAS_FreeU_V2 and WAS_PostCFGShift", prefix, [
        ("WAS_FreeU", dict(target_block="all", **freeu_inputs)),
        ("WAS_FreeU_V2", dict(input_block=True, middle_block=True, output_block=True, **freeu_inputs)),
        ("WAS_PostCFGShift", dict(steps=20, mode="lerp", blend=0.5, b=1.1, apply_fourier=True,
                                  multiscale_mode="Default", multiscale_strength=1.0, threshold=1, s=0.5,
                                  force_gain=1.0))])]


def rgthree(prefix, context):
    """Power Lora Loader over the host's MODEL and CLIP with the seeded LoRA, the widget
    value as rgthree's front end sends it; the host encodes with its CLIP and samples."""
    prompt = base()
    lora = {"on": True, "lora": context["lora"], "strength": 0.8}
    for suffix, side, named in sides(prefix):
        prompt[f"lora_{suffix}"] = node(named("Power Lora Loader (rgthree)"), model=["tiny", 0], clip=["tiny", 1],
                                        lora_1=lora)
        prompt[f"pos_{suffix}"] = node("CLIPTextEncode", clip=[f"lora_{suffix}", 1], text="a red fox in the snow")
        prompt[f"k_{suffix}"] = ksampler((f"lora_{suffix}", 0), positive=(f"pos_{suffix}", 0))
        prompt[side] = digest(side, latent=(f"k_{suffix}", 0), conditioning=(f"pos_{suffix}", 0))
    prompt.update({"k_plain": ksampler(("tiny", 0)),
                   "plain": digest("plain", latent=("k_plain", 0), conditioning=("pos", 0))})
    return [Part("Power Lora Loader", prompt, PAIRS, CHANGED)]


def noise(prefix, context):
    injected = base()
    for suffix, side, named in sides(prefix):
        injected.update({
            f"sigma_{suffix}": node(named("BNK_GetSigma"), model=["tiny", 0], sampler_name="euler", scheduler="normal",
                                    steps=3, start_at_step=0, end_at_step=3),
            f"noisy_{suffix}": node(named("BNK_NoisyLatentImage"), source="CPU", seed=11, width=64, height=64,
                                    batch_size=1),
            f"inject_{suffix}": node(named("BNK_InjectNoise"), latents=["latent", 0], strength=[f"sigma_{suffix}", 0],
                                     noise=[f"noisy_{suffix}", 0]),
            side: digest(side, latent=(f"inject_{suffix}", 0))})
    injected["plain"] = digest("plain", latent=("latent", 0))
    # The Unsampler runs upstream's sampler itself, with the host's MODEL, from an encoded image back to noise.
    unsampled = base()
    unsampled["encoded"] = node("VAEEncode", pixels=["noise", 0], vae=["tiny", 2])
    for suffix, side, named in sides(prefix):
        unsampled[f"unsample_{suffix}"] = node(named("BNK_Unsampler"), model=["tiny", 0], steps=3, end_at_step=0,
                                               cfg=1.0, sampler_name="euler", scheduler="normal", normalize="disable",
                                               positive=["pos", 0], negative=["neg", 0], latent_image=["encoded", 0])
        unsampled[side] = digest(side, latent=(f"unsample_{suffix}", 0))
    unsampled["plain"] = digest("plain", latent=("encoded", 0))
    return [Part("BNK_GetSigma and BNK_InjectNoise", injected, PAIRS, CHANGED),
            Part("BNK_Unsampler", unsampled, PAIRS, CHANGED)]


def tiled(prefix, context):
    prompt = base()
    prompt["wide"] = node("EmptyLatentImage", width=384, height=256, batch_size=1)
    sampling = dict(seed=7, steps=3, cfg=7.5, sampler_name="euler", scheduler="normal", positive=["pos", 0],
                    negative=["neg", 0], latent_image=["wide", 0], denoise=1.0)
    for suffix, side, named in sides(prefix):
        prompt[f"tiled_{suffix}"] = node(named("BNK_TiledKSampler"), model=["tiny", 0], tile_width=256,
                                         tile_height=256, tiling_strategy="random", **sampling)
        prompt[side] = digest(side, latent=(f"tiled_{suffix}", 0))
    prompt.update({"k_plain": node("KSampler", model=["tiny", 0], **sampling),
                   "plain": digest("plain", latent=("k_plain", 0))})
    return [Part("BNK_TiledKSampler", prompt, PAIRS, CHANGED)]


def automatic_cfg(prefix, context):
    return [patched("Automatic CFG", prefix, [("Automatic CFG", dict(hard_mode=True, boost=True))])]


def perturbed_attention(prefix, context):
    guidance = dict(sigma_start=-1.0, sigma_end=-1.0, rescale=0.0, rescale_mode="full", unet_block_list="")
    return [patched("PerturbedAttention (PAG)", prefix, [
                ("PerturbedAttention", dict(scale=3.0, adaptive_scale=0.0, unet_block="middle", unet_block_id=0,
                                            **guidance))]),
            patched("SmoothedEnergyGuidanceAdvanced (SEG)", prefix, [
                ("SmoothedEnergyGuidanceAdvanced", dict(scale=3.0, blur_sigma=-1.0, unet_block="middle",
                                                        unet_block_id=0, **guidance))]),
            # An empty block list: every transformer block of the tiny UNet (the default names SDXL's).
            patched("TokenPerturbationGuidance (TPG)", prefix, [("TokenPerturbationGuidance", dict(scale=3.0,
                                                                                                  **guidance))])]


def kjnodes(prefix, context):
    """CFGZeroStarAndInit patches the host's MODEL; ScheduledCFGGuidance makes a GUIDER of
    the pack's own class (upstream's CFGGuider subclassed) that the host's
    SamplerCustomAdvanced samples with, against upstream's CFGGuider at the same cfg."""
    guided = base()
    guided.update({"random": node("RandomNoise", noise_seed=7), "sampler": node("KSamplerSelect", sampler_name="euler"),
                   "sigmas": node("BasicScheduler", model=["tiny", 0], scheduler="normal", steps=3, denoise=1.0)})

    def sample(guider):
        return node("SamplerCustomAdvanced", noise=["random", 0], guider=guider, sampler=["sampler", 0],
                    sigmas=["sigmas", 0], latent_image=["latent", 0])
    for suffix, side, named in sides(prefix):
        guided[f"guider_{suffix}"] = node(named("ScheduledCFGGuidance"), model=["tiny", 0], positive=["pos", 0],
                                          negative=["neg", 0], cfg=6.0, start_percent=0.0, end_percent=0.5)
        guided[f"s_{suffix}"] = sample([f"guider_{suffix}", 0])
        guided[side] = digest(side, latent=(f"s_{suffix}", 0))
    guided.update({"guider_plain": node("CFGGuider", model=["tiny", 0], positive=["pos", 0], negative=["neg", 0],
                                        cfg=6.0),
                   "s_plain": sample(["guider_plain", 0]), "plain": digest("plain", latent=("s_plain", 0))})
    return [patched("CFGZeroStarAndInit", prefix, [("CFGZeroStarAndInit", dict(use_zero_init=True,
                                                                               zero_init_steps=0))]),
            Part("ScheduledCFGGuidance", guided, PAIRS, CHANGED)]


def ipadapter(prefix, context):
    """IPAdapterModelLoader loads the seeded adapter; IPAdapterAdvanced encodes a seeded
    image with the host's CLIP_VISION and replaces the host MODEL's cross-attentions
    (those of SD1's the tiny UNet has); the host's KSampler samples."""
    prompt = base()
    prompt["vision"] = node("ComfySupervisorCheckTinyClipVision", seed=1)
    for suffix, side, named in sides(prefix):
        prompt[f"loader_{suffix}"] = node(named("IPAdapterModelLoader"), ipadapter_file=context["ipadapter"])
        prompt[f"apply_{suffix}"] = node(named("IPAdapterAdvanced"), model=["tiny", 0], ipadapter=[f"loader_{suffix}", 0],
                                         image=["noise", 0], weight=1.0, weight_type="linear", combine_embeds="concat",
                                         start_at=0.0, end_at=1.0, embeds_scaling="V only", clip_vision=["vision", 0])
        prompt[f"k_{suffix}"] = ksampler((f"apply_{suffix}", 0))
        prompt[side] = digest(side, latent=(f"k_{suffix}", 0))
    prompt.update({"k_plain": ksampler(("tiny", 0)), "plain": digest("plain", latent=("k_plain", 0))})
    return [Part("IPAdapterModelLoader and IPAdapterAdvanced", prompt, PAIRS, CHANGED)]
