"""model_pack's nodes that use the host's VAE and CLIP_VISION as upstream's code in a pack does
(docs/PACKS.md, "Replicas"): isolated, each is the host's as a replica, upstream's own
class over the host's weights mapped; in one process, the host's own.

- HostVae: upstream's VAE methods on it (encode, decode, their tiled forms, the spacial
  compressions); HostClipVision: its encode_image. Each also says what the object is here
  (facts) and gives it back as it came; with `keep`, it is kept for UseKept.
- UseKept: the object kept last used again in this later call (after the host evicted it,
  in the checks), then let go.
"""

import json

CATEGORY = "comfy-supervisor tests"
KEPT = []  # what HostVae and HostClipVision were asked to keep, for UseKept


def mapped_share(module):
    """The share of `module`'s tensors' bytes that lie in memory another process's mirror
    mapped here (bridge/mirror.py names each mapping comfy-sv-mirror): 1.0 for a replica
    whose weights are all the host's, 0.0 for a module with memory of its own."""
    with open("/proc/self/maps") as maps:
        ranges = [tuple(int(bound, 16) for bound in line.split()[0].split("-")) for line in maps
                  if "comfy-sv-mirror" in line]
    tensors = list(module.parameters()) + list(module.buffers())
    total = sum(t.numel() * t.element_size() for t in tensors)
    inside = sum(t.numel() * t.element_size() for t in tensors
                 if any(start <= t.data_ptr() < end for start, end in ranges))
    return inside / total if total else 0.0


def facts(value, module_name):
    """What `value` is here: its class, whether it is a proxy, the share of its module's bytes
    mapped from another process, and its patcher's size."""
    from comfy_supervisor.bridge.remote import link_of
    found = {"class": f"{type(value).__module__}.{type(value).__qualname__}", "proxy": link_of(value) is not None}
    if not found["proxy"]:
        found.update(mapped=mapped_share(getattr(value, module_name)), model_size=value.patcher.model_size())
    return found


def vae_outputs(vae, image):
    latent = vae.encode(image)
    # Upstream's tiled encode adds in place into what its inference-mode tiling made: it
    # needs the inference mode ComfyUI's executor runs every node in, and so does a pack's
    # worker.
    tiled = vae.encode_tiled(image)
    return latent, vae.decode(latent), tiled, vae.decode_tiled(tiled)


def vision_outputs(clip_vision, image):
    out = clip_vision.encode_image(image)
    return {"samples": out["last_hidden_state"], "image_embeds": out["image_embeds"],
            "penultimate": out["penultimate_hidden_states"]}


class HostVae:
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("LATENT", "IMAGE", "LATENT", "IMAGE", "STRING", "VAE")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"vae": ("VAE",), "image": ("IMAGE",)},
                "optional": {"keep": ("BOOLEAN", {"default": False})}}

    def run(self, vae, image, keep=False):
        if keep:
            KEPT.append(vae)
        latent, decoded, tiled, decoded_tiled = vae_outputs(vae, image[:, :, :, :3])
        found = facts(vae, "first_stage_model")
        found["compression"] = [vae.spacial_compression_encode(), vae.spacial_compression_decode()]
        return ({"samples": latent}, decoded, {"samples": tiled}, decoded_tiled, json.dumps(found), vae)


class HostClipVision:
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("LATENT", "STRING", "CLIP_VISION")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"clip_vision": ("CLIP_VISION",), "image": ("IMAGE",)},
                "optional": {"keep": ("BOOLEAN", {"default": False})}}

    def run(self, clip_vision, image, keep=False):
        if keep:
            KEPT.append(clip_vision)
        return (vision_outputs(clip_vision, image), json.dumps(facts(clip_vision, "model")), clip_vision)


class UseKept:
    """The VAE's round trip or the CLIP_VISION's encoding of `image` with the object kept last;
    what it is here after that use."""
    CATEGORY = CATEGORY
    FUNCTION = "run"
    RETURN_TYPES = ("LATENT", "STRING")

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    def run(self, image):
        kept = KEPT.pop()
        if hasattr(kept, "encode_image"):
            return (vision_outputs(kept, image), json.dumps(facts(kept, "model")))
        latent, decoded, _, _ = vae_outputs(kept, image[:, :, :, :3])
        return ({"samples": latent, "decoded": decoded}, json.dumps(facts(kept, "first_stage_model")))


NODE_CLASS_MAPPINGS = {cls.__name__: cls for cls in (HostVae, HostClipVision, UseKept)}
