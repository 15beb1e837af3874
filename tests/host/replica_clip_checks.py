"""The host's CLIP in tests/packs/model_pack's worker as a replica (docs/PACKS.md, "Replicas";
tests/packs/model_pack/clip_nodes.py), a check of bridge_checks.py registered with
remote_checks.py's (tests/python/remote_objects_test.cpp):

    remote-replica-clip    the host's CLIP arrives as upstream's CLIP class, not a proxy, all
                           of its text encoder's bytes the host's mapped; its tokenize and
                           encode bit-equal to one process; a clone of it with a weight patch
                           of the pack's and clip_layer encodes bit-equal to the same in one
                           process (the host loads its weights with the patch), and the
                           host's own encode after that is as before; a LoRA the pack loads
                           on it with upstream's load_lora_for_models (adapter objects, not
                           data) is loaded on the host's CLIP and encodes bit-equal to one
                           process; its patcher's size 0
                           there, the ledger holding the CLIP once, the host's; given back,
                           it is the host's own CLIP; kept by the pack past the host's
                           eviction (which revokes the host's copy for it), its next encode
                           maps the host's weights again and is the same
"""

import json
import sys

import comfy.model_management as mm
import nodes
from comfy_supervisor.bridge import mirror
from mirror_checks import mappers, only_copy
from replica_vae_vision_checks import expect_counted_once, expect_replica

_checks = sys.modules["__main__"]  # bridge_checks: node(), link(), same(), expect(), raises(), host
TEXT = "a red fox"
KEY = "embedding.weight"  # a weight of our model's text encoder (comfy/sd1_clip.py) the pack patches


def remote():
    return sys.modules["remote_checks"]


def expect(condition, why):
    _checks.expect(condition, why)


def one_process():
    """The pack's HostClip imported into this process."""
    return remote().pack().clip_nodes.HostClip()


def check_clip():
    clip = remote().graph()[1]  # the host encoded with it: loaded
    host_before = nodes.CLIPTextEncode().encode(clip, TEXT)[0]
    conditioning, found, back = remote().node("HostClip").run(clip=clip, text=TEXT)
    expect_replica(json.loads(found), "comfy.sd.CLIP", "CLIP")
    expect(back is clip, f"the CLIP the pack gave back is {back!r}, not the host's own")
    expect(remote().same_values(conditioning, one_process().run(clip, TEXT)[0]),
           "the replica's conditioning differs from one process")
    expect_counted_once(clip.cond_stage_model, 1)

    patched = remote().node("HostClip").run(clip=clip, text=TEXT, key=KEY, patch=0.05)[0]
    expect(remote().same_values(patched, one_process().run(clip, TEXT, KEY, 0.05)[0]),
           "the conditioning of the pack's patched clone of the replica differs from one process")
    expect(not remote().same_values(patched, conditioning), "the pack's weight patch changed nothing")
    expect(remote().same_values(nodes.CLIPTextEncode().encode(clip, TEXT)[0], host_before),
           "the host's own encode differs after the pack's patched encode")

    (lora,) = remote().node("ClipLora").run(clip=clip, text=TEXT, key=KEY)
    expect(remote().same_values(lora, remote().pack().clip_nodes.ClipLora().run(clip, TEXT, KEY)[0]),
           "the conditioning of the host's CLIP with the pack's LoRA differs from one process")
    expect(not remote().same_values(lora, conditioning), "the pack's LoRA changed nothing")

    remote().node("HostClip").run(clip=clip, text=TEXT, keep=True)
    copy = only_copy(clip.cond_stage_model)
    expect(len(mappers(copy)) == 1, "the CLIP the pack keeps does not map the host's weights")
    mm.unload_all_models()  # the host's eviction: the replica the pack kept is revoked
    expect(not copy.current() and copy not in mirror.publications_of(clip.cond_stage_model),
           "the host's eviction left its copy of the CLIP's weights for the pack")
    again, found = remote().node("EncodeKept").run(text=TEXT)
    expect(remote().same_values(again, conditioning), "the kept replica encodes otherwise after the host's eviction")
    expect(json.loads(found).get("mapped") == 1.0 and only_copy(clip.cond_stage_model) is not copy,
           "the kept replica's next encode did not map the host's weights again")


CHECKS = {"remote-replica-clip": check_clip}
