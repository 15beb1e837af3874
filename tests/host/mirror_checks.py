"""The mirrors' checks of bridge_checks.py (tests/python/remote_objects_test.cpp): a pack's
node that reaches into the host MODEL's `model.model.diffusion_model` and runs torch on it
(tests/packs/model_pack's MirrorForward) gets the module itself, built in its worker over
the host's weights mapped (docs/PACKS.md, "Mirrors").

    mirror-forward    the forward and the weights' norm bit-equal to the same node in one
                      process; the worker maps the host's one copy for it during the call,
                      the host's own parameters stay its own, and no mapping of it is left
                      in the worker once the call returned
    mirror-clip-vision a host CLIP_VISION's `model` run in the worker as IPAdapter runs it
                      (MirrorClipVision): a mirror built from the configuration the host's
                      ClipVisionModel was built from, bit-equal to one process, unmapped
                      once the call returned
    mirror-by-name    the same module read with get_model_object("diffusion_model"), as
                      packs read it too: the same mirror, bit-equal to one process
    mirror-writes     a weight the node doubles in place is the worker's own: the host's
                      weights are unchanged, and the next call sees them as they were
    mirror-tamper     a pack that reopens the mapping of the host's weights writable (pwrite,
                      a shared writable mapping) writes the copy made for it, never the
                      host's weights, and its next mirror is a fresh copy
    mirror-ledger     during a mirrored call the ledger holds the model once, the host's
                      entry, and the worker none
    mirror-evicted    the host's model evicted (the arbiter's eviction, _Host.unload; then
                      upstream's own, unload_all_models) while the worker holds a mirror (its
                      replica's, kept): the mirror is revoked first, and its next use in the
                      node maps the host's weights again; the host's weights stay intact
    mirror-dead-owner the host mirrors the pack's own model (the same code, the other way):
                      equal to one process, and the pages it read are not in the host's
                      census (they are the pack's); the pack's worker dies; the host unmaps,
                      the mirror's next use raises one line, and the host goes on
    mirror-kept-descriptor a hostile pack keeps the memfd its mirror came on (a dup, reopened
                      through /proc/self/fd, /proc/self/map_files and the host's /proc/PID/fd
                      where it can, a mapping of its own) past the host's eviction, and past
                      the host dropping the MODEL: the host's copy is punched out each time
                      (its pages freed), what the pack kept reads zeros, and the host's model
                      samples as before (with tests/packs/hostile_pack, sandboxed or not)
"""

import gc
import json
import os
import sys

import comfy.model_management as mm
import torch
from comfy_supervisor import participant as sv
from comfy_supervisor.bridge import mirror
from comfy_supervisor.bridge.remote import RemoteError
from comfy_supervisor.host import proxy_nodes

_checks = sys.modules["__main__"]  # bridge_checks: node(), link(), same(), expect(), raises(), host


def remote():
    return sys.modules["remote_checks"]


def expect(condition, why):
    _checks.expect(condition, why)


def weights(module):
    return {name: tensor.detach().clone() for name, tensor in module.state_dict().items()}


def mappers(publication):
    """The pids of other processes that map the publication's memfd now."""
    inode = os.fstat(publication.fd).st_ino
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/maps") as maps:
                if any("comfy-sv-mirror" in line and line.split()[4] == str(inode) for line in maps):
                    found.add(int(pid))
        except OSError:
            continue
    return found


def only_copy(module):
    """The one copy of `module` the host made for the pack's mirrors."""
    publications = mirror.publications_of(module)
    expect(len(publications) == 1, f"the host holds {len(publications)} copies of the module for the pack")
    return publications[0]


def published(tensor):
    """Whether `tensor` lies in a memfd this process published for mirrors."""
    address = tensor.data_ptr()
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "comfy-sv-mirror" in line:
                start, end = (int(bound, 16) for bound in line.split()[0].split("-"))
                if start <= address < end:
                    return True
    return False


def census_without_mirrors():
    """(the mirrors' pages mapped here, what the census leaves out of the resident set), read
    while the resident set stood still; None if it never did."""
    for _ in range(20):
        before = sv.resident_set_bytes()
        census = _checks.host.resident_set_bytes()
        mapped = mirror.mapped_bytes()
        if sv.resident_set_bytes() == before:
            return mapped, before - census
    return None


def mirrored_run(model, write=False, probe=None):
    return _checks.node("MirrorForward", "model").run(model=model, write=write, probe=probe)


def check_forward():
    model = remote().graph()[0]
    seen = {}

    def probe():
        seen["mappers"] = mappers(only_copy(model.model.diffusion_model))

    latent, norm, after = mirrored_run(model, probe=probe)
    expected = remote().pack().MirrorForward().run(model)
    expect(_checks.same(latent, expected[0]) and _checks.same(norm, expected[1]),
           f"the mirrored forward differs from the same node in one process (norm {norm} vs {expected[1]})")
    expect(after == "ran", f"the mirror's second use in the call: {after!r}")
    publication = only_copy(model.model.diffusion_model)
    expect(publication.current() and not any(published(t) for t in model.model.diffusion_model.parameters()),
           "the host's own parameters are not its own any more, or its copy for the pack is stale")
    expect(len(seen["mappers"]) == 1, f"during the call {len(seen['mappers'])} other processes map the memfd")
    expect(not mappers(publication), "the worker still maps the host's weights after the call returned")


def check_by_name():
    model = remote().graph()[0]
    latent, norm, _ = _checks.node("MirrorForward", "model").run(model=model, by_name=True)
    expected = remote().pack().MirrorForward().run(model)
    expect(_checks.same(latent, expected[0]) and _checks.same(norm, expected[1]),
           "the diffusion model read by get_model_object runs otherwise than in one process")
    expect(not mappers(only_copy(model.model.diffusion_model)), "the worker still maps the host's weights")


def check_writes():
    model = remote().graph()[0]
    before = weights(model.model.diffusion_model)
    written = mirrored_run(model, write=True)
    expect(all(_checks.same(before[name], tensor) for name, tensor in weights(model.model.diffusion_model).items()),
           "the worker's write into its mirror changed the host's weights")
    plain = remote().pack().MirrorForward().run(model)
    expect(not _checks.same(written[0], plain[0]), "the worker's write changed nothing of its own forward")
    expect(_checks.same(mirrored_run(model)[0], plain[0]), "the next call saw the worker's earlier write")


def check_tamper():
    model = remote().graph()[0]
    before = weights(model.model.diffusion_model)
    (outcome,) = _checks.node("MirrorTamper", "model").tamper(model=model)
    expect(outcome.startswith("1 mappings;"), f"the pack's tries to write the host's weights: {outcome}")
    expect(all(_checks.same(before[name], tensor) for name, tensor in weights(model.model.diffusion_model).items()),
           "the pack wrote the host's weights")
    expect(_checks.same(mirrored_run(model)[0], remote().pack().MirrorForward().run(model)[0]),
           "the next mirror differs from one process")


def check_ledger():
    model = remote().graph()[0]
    mm.load_models_gpu([model])
    host = _checks.host
    size = sum(t.numel() * t.element_size() for t in model.model.state_dict().values())
    seen = {}

    def probe():
        seen["ledger"] = [(entry.owner_slot, entry.total_bytes) for entry in host.link.read_ledger()]

    mirrored_run(model, probe=probe)
    ours = [entry for entry in seen["ledger"] if entry[0] == host.link.slot and entry[1] == size]
    theirs = [entry for entry in seen["ledger"] if entry[0] != host.link.slot]
    expect(len(ours) == 1 and not theirs, f"during the mirrored call the ledger holds {seen['ledger']} "
                                          f"(the model: {size} bytes, the host slot {host.link.slot})")


def check_evicted():
    host = _checks.host

    def by_the_arbiter(model, loaded):
        host.unload(type("Command", (), {"type": sv.DETACH, "model_id": host.ids[id(model)], "bytes": 0})())

    def by_upstream(model, loaded):
        mm.unload_all_models()

    for evict in (by_the_arbiter, by_upstream):
        evicted_while_mirrored(evict)


def evicted_while_mirrored(evict):
    model = remote().graph()[0]
    mm.load_models_gpu([model])
    before = weights(model.model.diffusion_model)
    seen = {}

    def probe():
        loaded = next(entry for entry in mm.current_loaded_models if entry.model is model)
        seen["mapped"] = mappers(only_copy(model.model.diffusion_model))
        evict(model, loaded)
        seen["unloaded"] = loaded not in mm.current_loaded_models

    _, _, after = mirrored_run(model, probe=probe)
    expect(seen["unloaded"] and len(seen["mapped"]) == 1, f"the eviction {evict.__name__}: {seen}")
    # A replica's diffusion model is a kept mirror: its next use after the eviction maps the
    # host's weights again, in place (bridge/mirror.py, Mirror.fresh).
    expect(after == "ran", f"the mirror's use after its owner's eviction {evict.__name__}: {after!r}")
    expect(all(_checks.same(before[name], tensor) for name, tensor in weights(model.model.diffusion_model).items()),
           "the host's weights changed")
    expect(_checks.same(mirrored_run(model)[0], remote().pack().MirrorForward().run(model)[0]),
           "a mirror read again after the eviction differs from one process")


def check_dead_owner():
    (model,) = _checks.node("LoadModel", "model").load(name="pack-model")
    unet = model.model.diffusion_model
    expect(isinstance(unet, torch.nn.Module) and not isinstance(unet, type(model.model)),
           f"the host's mirror of the pack's model is {unet!r}")
    in_one_process = remote().pack().LoadModel().load("pack-model")[0].model.diffusion_model
    expect(_checks.same(remote().pack().mirror_forward(unet), remote().pack().mirror_forward(in_one_process)),
           "the host's mirror of the pack's model runs otherwise than the model itself")
    size = sum(t.numel() * t.element_size() for t in in_one_process.parameters())
    census = census_without_mirrors()
    expect(census is not None and size <= census[0] <= size + 4 * mirror.PAGE and census[1] == census[0],
           f"the host's census and the pack's pages it read through the mirror: {census} (the model {size} bytes)")
    _checks.raises(lambda: _checks.node("ExitMidNode", "model").run(), proxy_nodes.PackWorkerDied)
    error = str(_checks.raises(lambda: remote().pack().mirror_forward(unet), RemoteError))
    expect("\n" not in error and error.startswith("the mirror of pack model's DIFFUSION_MODEL") and
           "worker life" in error, f"the mirror after its owner died: {error!r}")
    expect(mirror.mapped_bytes() == 0, "the host still maps the dead pack's weights")
    (again,) = _checks.node("LoadModel", "model").load(name="pack-model")
    expect(_checks.same(remote().pack().mirror_forward(again.model.diffusion_model),
                        remote().pack().mirror_forward(in_one_process)), "the pack's next life's mirror")


def check_clip_vision():
    import nodes
    (clip_vision,) = nodes.CLIPVisionLoader().load_clip("tiny-clip-vision")
    image = torch.rand(1, 40, 48, 3, generator=torch.Generator().manual_seed(5))
    (isolated,) = _checks.node("MirrorClipVision", "model").run(clip_vision=clip_vision, image=image)
    (expected,) = remote().pack().MirrorClipVision().run(clip_vision, image)
    expect(_checks.same(isolated, expected), "the mirrored CLIP vision model's output differs from one process")
    publication = only_copy(clip_vision.model)
    expect(not mappers(publication), "the worker still maps the host's CLIP vision weights after the call returned")


def check_kept_descriptor():
    """tests/packs/hostile_pack's KeepMirror keeps what it can of the memfd its mirror came on;
    the host's eviction (upstream's unload_all_models) takes the pages back, and after it,
    and after the host dropped the MODEL, what it kept reads zeros."""
    model, _, _, positive, negative, latent = remote().graph()
    sampled = remote().ksample(model, positive, negative, latent)
    mm.load_models_gpu([model])
    kept = kept_by_the_pack(model)
    watch = os.dup(mirror.publications_of(model.model.diffusion_model)[0].fd)
    expect(os.fstat(watch).st_blocks > 0, "the host's copy for the pack holds no pages")
    mm.unload_all_models()
    blocks = os.fstat(watch).st_blocks
    os.close(watch)
    expect(blocks == 0 and not mirror.publications_of(model.model.diffusion_model),
           f"after the eviction the host's copy for the pack still holds {blocks} blocks")
    read_zeros("the eviction", kept)
    expect(_checks.same(remote().ksample(model, positive, negative, latent), sampled),
           "the host's model samples otherwise after the eviction")
    kept = kept_by_the_pack(model)  # granted again, and kept again
    watch = os.dup(mirror.publications_of(model.model.diffusion_model)[0].fd)
    del model, positive, negative
    _checks.node("Add", "hostile").run(a=1, b=2)  # a call, on whose frames the pack lets go of the MODEL
    gc.collect()
    blocks = os.fstat(watch).st_blocks
    os.close(watch)
    expect(blocks == 0, f"after the host dropped the MODEL its copy for the pack still holds {blocks} blocks")
    read_zeros("the host dropped the MODEL", kept)
    _checks.say("mirror-kept-descriptor: the pack kept " + ", ".join(
        f"{how} ({found})" if isinstance(found, str) else how for how, found in kept.items()))


def kept_by_the_pack(model):
    """What KeepMirror kept of the mirror's memfd, each with its bytes that were not zero then
    (or why it could not keep it); the mirror computed over the host's weights."""
    (answer,) = _checks.node("KeepMirror", "hostile").run(model=model)
    answer = json.loads(answer)
    unet = model.model.diffusion_model
    norm = float(sum(float(p.double().abs().sum()) for p in unet.parameters()))
    kept = answer["kept"]
    expect(answer["norm"] == norm, f"the pack's mirror's weights' norm {answer['norm']}, the host's {norm}")
    expect(all(isinstance(kept.get(how), int) and kept[how] > 0 for how in ("dup", "reopened", "mapping")) and
           all(found > 0 for found in kept.values() if isinstance(found, int)),
           f"before revocation the pack did not keep, or read nothing through, {kept}")
    return kept


def read_zeros(after, kept):
    (read,) = _checks.node("ReadKept", "hostile").run()
    read = json.loads(read)
    expect(sorted(read) == sorted(how for how, found in kept.items() if isinstance(found, int)) and
           all(blocks == 0 and nonzero == 0 for blocks, nonzero in read.values()),
           f"after {after} what the pack kept holds [blocks, bytes not zero]: {read}")


CHECKS = {"mirror-forward": check_forward, "mirror-clip-vision": check_clip_vision, "mirror-by-name": check_by_name,
          "mirror-writes": check_writes, "mirror-tamper": check_tamper,
          "mirror-ledger": check_ledger,
          "mirror-evicted": check_evicted, "mirror-dead-owner": check_dead_owner,
          "mirror-kept-descriptor": check_kept_descriptor}
