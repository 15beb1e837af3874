"""Our model of upstream's nodes.py, for what comfy_supervisor depends on: the folders of
front-end files by pack name, which upstream's server serves under /extensions/NAME; as
upstream does on import, comfy/ put first on the module path (after which `utils` is
comfy/utils.py to anything that imports it for the first time); and the core nodes a
graph of the bridge's tests uses, with upstream's names, inputs and outputs:
CheckpointLoaderSimple (small seeded models), CLIPTextEncode, KSampler (through
common_ksampler, which packs call too), VAEEncode, VAEDecode, ControlNetLoader and
ControlNetApplyAdvanced, and CLIPVisionLoader (a small seeded
CLIP vision model, comfy/clip_vision.py); init_extra_nodes, which loads comfy_extras'
node files as upstream does (RandomNoise, DisableNoise); and init_external_custom_nodes,
which imports a custom_nodes folder by upstream's rules."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "comfy"))

EXTENSION_WEB_DIRS = {}
NODE_DISPLAY_NAME_MAPPINGS = {}  # as upstream: a registered node's name for people


def common_ksampler(model, seed, steps, cfg, sampler_name, scheduler, positive, negative, latent, denoise=1.0,
                    disable_noise=False, start_step=None, last_step=None, force_full_denoise=False):
    import comfy.sample
    latent_image = latent["samples"]
    noise = comfy.sample.prepare_noise(latent_image, seed)
    samples = comfy.sample.sample(model, noise, steps, cfg, sampler_name, scheduler, positive, negative,
                                  latent_image, denoise=denoise, seed=seed)
    out = latent.copy()
    out["samples"] = samples
    return (out,)


class CheckpointLoaderSimple:
    FUNCTION = "load_checkpoint"
    RETURN_TYPES = ("MODEL", "CLIP", "VAE")

    def load_checkpoint(self, ckpt_name):
        import comfy.sd
        return comfy.sd.load_checkpoint_guess_config(ckpt_name)[:3]


class CLIPTextEncode:
    FUNCTION = "encode"
    RETURN_TYPES = ("CONDITIONING",)

    def encode(self, clip, text):
        return (clip.encode_from_tokens_scheduled(clip.tokenize(text)),)


class KSampler:
    FUNCTION = "sample"
    RETURN_TYPES = ("LATENT",)

    def sample(self, model, seed, steps, cfg, sampler_name, scheduler, positive, negative, latent_image,
               denoise=1.0):
        return common_ksampler(model, seed, steps, cfg, sampler_name, scheduler, positive, negative, latent_image,
                               denoise=denoise)


class VAEEncode:
    FUNCTION = "encode"
    RETURN_TYPES = ("LATENT",)

    def encode(self, vae, pixels):
        return ({"samples": vae.encode(pixels[:, :, :, :3])},)


class VAEDecode:
    FUNCTION = "decode"
    RETURN_TYPES = ("IMAGE",)

    def decode(self, vae, samples):
        return (vae.decode(samples["samples"]),)


class ControlNetLoader:
    FUNCTION = "load_controlnet"
    RETURN_TYPES = ("CONTROL_NET",)

    def load_controlnet(self, control_net_name):
        import comfy.controlnet
        return (comfy.controlnet.ControlNet(),)


class ControlNetApplyAdvanced:
    FUNCTION = "apply_controlnet"
    RETURN_TYPES = ("CONDITIONING", "CONDITIONING")

    def apply_controlnet(self, positive, negative, control_net, image, strength, start_percent, end_percent,
                         vae=None, extra_concat=[]):
        if strength == 0:
            return (positive, negative)
        control_hint = image.movedim(-1, 1)
        cnets = {}
        out = []
        for conditioning in [positive, negative]:
            c = []
            for t in conditioning:
                d = t[1].copy()
                prev_cnet = d.get("control", None)
                if prev_cnet in cnets:
                    c_net = cnets[prev_cnet]
                else:
                    c_net = control_net.copy().set_cond_hint(control_hint, strength, (start_percent, end_percent),
                                                             vae=vae, extra_concat=extra_concat)
                    c_net.set_previous_controlnet(prev_cnet)
                    cnets[prev_cnet] = c_net
                d["control"] = c_net
                d["control_apply_to_uncond"] = False
                c.append([t[0], d])
            out.append(c)
        return (out[0], out[1])


class CLIPVisionLoader:
    FUNCTION = "load_clip"
    RETURN_TYPES = ("CLIP_VISION",)

    def load_clip(self, clip_name):
        import comfy.clip_vision
        return (comfy.clip_vision.load(clip_name),)


def init_extra_nodes():
    """As upstream's: each node file of comfy_extras loaded as load_custom_node loads it,
    under its path without ".py" (so its classes are not those of an import by name), its
    nodes added to NODE_CLASS_MAPPINGS. Ours has one file."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.realpath(__file__)), "comfy_extras", "nodes_custom_sampler.py")
    name = os.path.splitext(path)[0]
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        NODE_CLASS_MAPPINGS.update({"RandomNoise": module.RandomNoise, "DisableNoise": module.DisableNoise})


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (CheckpointLoaderSimple, CLIPTextEncode, KSampler, VAEEncode,
                                                      VAEDecode, ControlNetLoader, ControlNetApplyAdvanced,
                                                      CLIPVisionLoader)}


def load_custom_node(module_path, base_node_names=frozenset()):
    """As upstream's: the folder (or .py file) imported under its path as the module's name
    (a folder's with each "." made "_x_", a file's without ".py"), so no pack's module takes a
    name an import would find; its NODE_CLASS_MAPPINGS added but for the names of ComfyUI's
    own nodes, its front end noted under its folder's name; an import that fails is logged
    and leaves nothing. Whether it loaded."""
    import importlib.util
    import logging
    name = os.path.splitext(os.path.basename(module_path))[0]
    is_folder = os.path.isdir(module_path)
    module_name = module_path.replace(".", "_x_") if is_folder else os.path.splitext(module_path)[0]
    init = os.path.join(module_path, "__init__.py") if is_folder else module_path
    try:
        spec = importlib.util.spec_from_file_location(module_name, init)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001 (upstream's own: any pack's failure is logged)
        logging.warning(f"Cannot import {module_path} module for custom nodes: {error}")
        return False
    web = getattr(module, "WEB_DIRECTORY", None)
    if isinstance(web, str):
        EXTENSION_WEB_DIRS[name] = os.path.abspath(os.path.join(module_path, web))
    for node, cls in getattr(module, "NODE_CLASS_MAPPINGS", {}).items():
        if node not in base_node_names:
            NODE_CLASS_MAPPINGS[node] = cls
    NODE_DISPLAY_NAME_MAPPINGS.update(getattr(module, "NODE_DISPLAY_NAME_MAPPINGS", {}))
    return True


def init_external_custom_nodes(custom_nodes):
    """Every entry of the folder `custom_nodes` loaded as upstream's loader walks it: files
    other than .py, __pycache__ and what ends in .disabled passed over, and with
    --disable-all-custom-nodes only the whitelisted ones; in name order, where upstream takes
    the folder's own."""
    from comfy.cli_args import args
    base_node_names = set(NODE_CLASS_MAPPINGS)
    for name in sorted(os.listdir(custom_nodes)):
        path = os.path.join(custom_nodes, name)
        if name == "__pycache__" or (os.path.isfile(path) and not name.endswith(".py")) or name.endswith(".disabled"):
            continue
        if args.disable_all_custom_nodes and name not in args.whitelist_custom_nodes:
            continue
        load_custom_node(path, base_node_names)
