"""The patched model's figures of scripts/bench bridge (docs/BENCHMARKS.md, "Replicas"),
measured by bridge_host.py against tests/packs/model_pack in its worker: the host's MODEL
patched in the pack with K attention patches of the pack's (its PatchManyTimes), then
sampled by the host's KSampler, for each K of PATCHES. The clone the pack patched is the
pack's object, so the host's sampler has the pack sample it on its replica
(crossing/forwarded.py):

- patched_model_crossings_per_eval[K]: the requests sent between the host and the pack,
  either way, during one sampling run (the uses of the other side's objects and functions,
  each a round trip: Conversation._request on the host's side, and the pack's served by
  its on_invoke), divided by the model evaluations of that run (the diffusion model's
  forwards, counted in the pack by the patches' own calls: each forward calls each of the
  K patches once); with the frames sent either way beside it (requests, answers,
  releases, descriptors: the two frames words), and the evaluations themselves;
- sample_step_overhead_us[K]: per step of that sampling, the time over the same with the
  pack imported into the host's process, the medians of RUNS runs of each, interleaved
  (remote_bench.step_us); and patched_model_step_us[K], that one process's own time a step,
  the scale the overhead is measured against.
"""

import time

import remote_bench

PATCHES = (1, 4, 16)
# Sampling runs of each side per K: the overhead is one crossing a run, a small part of a
# run's time on this small model, so more runs than remote_bench's RUNS narrow its medians.
RUNS = 31
SETTLE_S = 0.05


def patched_model_figures(classes, session):
    """`session`: the host's PackSession with model_pack's worker."""
    import nodes
    if not hasattr(nodes.common_ksampler, "__wrapped__"):
        raise SystemExit("bench: the host's common_ksampler is upstream's own, not forwarded: this host did not "
                         "install what ComfyUI's does (comfy_supervisor.host.comfyui.install)")
    model = nodes.CheckpointLoaderSimple().load_checkpoint("tiny.safetensors")[0]
    local_pack = remote_bench.pack_in_host()
    crossings, details, overhead, local_step = {}, {}, {}, {}
    for count in PATCHES:
        isolated = classes["PatchManyTimes"]().patch(model=model, count=count)[0]
        local = local_pack.PatchManyTimes().patch(model, count)[0]
        counted = counted_run(classes, session, lambda: remote_bench.sample(isolated), count)
        crossings[str(count)] = counted["requests"] / counted["evaluations"]
        details[str(count)] = counted
        isolated_us, local_us = remote_bench.step_us(isolated, local, RUNS)
        overhead[str(count)], local_step[str(count)] = isolated_us - local_us, local_us
    return {"patched_model_crossings_per_eval": crossings, "patched_model_crossings": details,
            "sample_step_overhead_us": overhead, "patched_model_step_us": local_step}


def counted_run(classes, session, run, patches):
    """Runs `run()` (one sampling) with the requests and frames between the host and the
    pack counted, and the model evaluations it made counted in the pack."""
    conversation, channel = session.remote, session.channel
    counts = {"host_to_pack": 0, "pack_to_host": 0}
    request, on_invoke = conversation._request, conversation.on_invoke

    def counted_request(*args, **kwargs):
        counts["host_to_pack"] += 1
        return request(*args, **kwargs)

    def counted_on_invoke(message):
        counts["pack_to_host"] += 1
        return on_invoke(message)

    (uses_before,) = classes["PatchUses"]().uses()
    frames_before = channel.own_frames[0], channel.peer_frames[0]
    conversation._request, conversation.on_invoke = counted_request, counted_on_invoke
    try:
        run()
    finally:
        del conversation._request, conversation.on_invoke  # the class's own again
    # The worker counts a frame once it is whole in the socket, so its last one (its answer)
    # may be read and handled here before its count is: let that count land.
    time.sleep(SETTLE_S)
    frames = [(after - before) & 0xFFFFFFFF
              for before, after in zip(frames_before, (channel.own_frames[0], channel.peer_frames[0]))]
    (uses_after,) = classes["PatchUses"]().uses()
    evaluations = (uses_after - uses_before) // patches
    if evaluations <= 0 or (uses_after - uses_before) % patches:
        raise SystemExit(f"bench: the pack's {patches} patches were called {uses_after - uses_before} times in a "
                         "sampling run: not once each per evaluation")
    return {**counts, "requests": counts["host_to_pack"] + counts["pack_to_host"], "evaluations": evaluations,
            "frames_host_to_pack": frames[0], "frames_pack_to_host": frames[1]}
