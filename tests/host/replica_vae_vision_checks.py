"""The host's VAE and CLIP_VISION in tests/packs/model_pack's worker as replicas (docs/PACKS.md,
"Replicas"; tests/packs/model_pack/replica_nodes.py), checks of bridge_checks.py registered
with remote_checks.py's (tests/python/remote_objects_test.cpp):

    remote-replica-vae     the host's VAE arrives as upstream's VAE class, not a proxy, all
                           of its first stage model's bytes the host's mapped; its encode,
                           decode, tiled forms and spacial compressions bit-equal to one
                           process; its patcher's size 0 there, the ledger holding the VAE
                           once, the host's; given back, it is the host's own VAE; kept by
                           the pack past the host's eviction (which revokes the host's copy
                           for it), its next use maps the host's weights again and computes
                           the same
    remote-replica-clip-vision  the same of the host's CLIP_VISION and its encode_image
"""

import json
import sys

import comfy.model_management as mm
import torch
from comfy_supervisor.bridge import mirror
from mirror_checks import only_copy

_checks = sys.modules["__main__"]  # bridge_checks: node(), link(), same(), expect(), raises(), host


def remote():
    return sys.modules["remote_checks"]


def expect(condition, why):
    _checks.expect(condition, why)


def same_outputs(isolated, one_process):
    """Each output bit-equal, a LATENT's every tensor included."""
    pairs = []
    for a, b in zip(isolated, one_process):
        if isinstance(a, dict):
            pairs += [(a.get(key), b[key]) for key in b]
        elif isinstance(a, torch.Tensor):
            pairs.append((a, b))
    return len(pairs) > 0 and all(isinstance(a, torch.Tensor) and _checks.same(a, b) for a, b in pairs)


def expect_replica(found, cls, what):
    expect(found.get("class") == cls and found.get("proxy") is False,
           f"the host's {what} arrived as {found.get('class')} (a proxy: {found.get('proxy')}), not a replica")
    expect(found.get("mapped") == 1.0, f"{found.get('mapped')} of the {what} replica's weights are the host's mapped")
    expect(found.get("model_size") == 0, f"the {what} replica's patcher counts {found.get('model_size')} bytes")


def expect_counted_once(module, host_entries):
    """The ledger holds the model `host_entries` times as the host's (once on the device, none
    on the CPU), and nothing of the pack's: its replica counts nothing."""
    host = _checks.host
    ledger = host.link.read_ledger()
    size = sum(t.numel() * t.element_size() for t in module.state_dict().values())
    ours = [entry for entry in ledger if entry.owner_slot == host.link.slot and entry.total_bytes == size]
    theirs = [(entry.owner_slot, entry.total_bytes, entry.loaded_bytes) for entry in ledger
              if entry.owner_slot != host.link.slot and (entry.total_bytes or entry.loaded_bytes)]
    expect(len(ours) == host_entries and not theirs,
           f"the ledger holds the model of {size} bytes {len(ours)} times as the host's, and {theirs} of the pack's")


def evicted_then_used(module, patcher, image, expected, evict):
    """The host evicts the model the pack keeps: its copy for the pack is revoked; the pack's
    next use of what it kept maps the host's weights again, and computes `expected`."""
    copy = only_copy(module)
    evict(patcher)
    expect(not copy.current() and copy not in mirror.publications_of(module),
           "the host's eviction left its copy of the weights for the pack")
    outputs, found = remote().node("UseKept").run(image=image)
    expect(same_outputs([outputs], [expected]), "the kept replica computes otherwise after the host's eviction")
    expect(json.loads(found).get("mapped") == 1.0 and only_copy(module) is not copy,
           "the kept replica's next use did not map the host's weights again")


def by_upstream(patcher):
    mm.unload_all_models()


def unloaded(patcher):
    """Upstream's own unload of the model's entry (the fake's model of a CPU model leaves it
    out of unload_all_models, which frees the device)."""
    loaded = next(entry for entry in mm.current_loaded_models if entry.model is patcher)
    loaded.model_unload()
    mm.current_loaded_models.remove(loaded)


def check_vae():
    vae = remote().graph()[2]
    image = torch.rand(1, 32, 32, 4, generator=torch.Generator().manual_seed(5))
    *isolated, found, back = remote().node("HostVae").run(vae=vae, image=image, keep=True)
    with torch.inference_mode():  # as ComfyUI's executor runs a node (a tiled encode needs it)
        *one_process, _, _ = remote().pack().replica_nodes.HostVae().run(vae, image)
        expected = remote().pack().replica_nodes.vae_outputs(vae, image[:, :, :, :3])
    found = json.loads(found)
    expect_replica(found, "comfy.sd.VAE", "VAE")
    expect(same_outputs(isolated, one_process), "the VAE replica's encode and decode differ from one process")
    expect(found.get("compression") == [vae.spacial_compression_encode(), vae.spacial_compression_decode()],
           f"the replica's spacial compressions {found.get('compression')}")
    expect(back is vae, f"the VAE the pack gave back is {back!r}, not the host's own")
    expect_counted_once(vae.first_stage_model, 1)
    evicted_then_used(vae.first_stage_model, vae.patcher, image, {"samples": expected[0], "decoded": expected[1]},
                      by_upstream)


def check_clip_vision():
    import nodes
    (clip_vision,) = nodes.CLIPVisionLoader().load_clip("tiny-clip-vision")
    image = torch.rand(1, 40, 48, 3, generator=torch.Generator().manual_seed(6))
    isolated, found, back = remote().node("HostClipVision").run(clip_vision=clip_vision, image=image, keep=True)
    expected = remote().pack().replica_nodes.vision_outputs(clip_vision, image)
    expect_replica(json.loads(found), "comfy.clip_vision.ClipVisionModel", "CLIP_VISION")
    expect(same_outputs([isolated], [expected]), "the CLIP_VISION replica's encode_image differs from one process")
    expect(back is clip_vision, f"the CLIP_VISION the pack gave back is {back!r}, not the host's own")
    expect_counted_once(clip_vision.model, 0)
    evicted_then_used(clip_vision.model, clip_vision.patcher, image, expected, unloaded)


CHECKS = {"remote-replica-vae": check_vae, "remote-replica-clip-vision": check_clip_vision}
