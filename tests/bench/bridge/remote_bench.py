"""The remote objects' figures of scripts/bench bridge (docs/BENCHMARKS.md, "Remote objects"),
measured by bridge_host.py against tests/packs/model_pack in its worker:

- remote_call_rtt_us: an empty call of a function of the pack's, from the host (one use of
  a remote object, there and back), p50 and p99;
- sample_step_overhead_us: per step of the host's KSampler over a small model, the extra
  time of the pack's attention patch called back in its worker over the same patch with the
  pack imported into the host's process (the fake's sampler calls it twice a step: the
  conditioning and the unconditioning), the median of runs;
- pack_model_step_overhead_us: the same for a MODEL the pack loaded (its LoadModel) and the
  host's KSampler samples with: each call of the model (twice a step) and each read of what
  the sampler asks of it run in the pack's worker, against the same model loaded in the
  host's process."""

import importlib.util
import os
import statistics
import time

import torch

CALLS = 5000
WARMUP = 500
STEPS = 20
RUNS = 15
PACK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "packs", "model_pack", "__init__.py")


def percentile(samples, fraction):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def remote_call_rtt_us(classes):
    (function,) = classes["EmptyFunction"]().make()
    for _ in range(WARMUP):
        function()
    samples = []
    for _ in range(CALLS):
        started = time.perf_counter()
        function()
        samples.append((time.perf_counter() - started) * 1e6)
    return {"p50": percentile(samples, 0.5), "p99": percentile(samples, 0.99)}


def pack_in_host():
    spec = importlib.util.spec_from_file_location("model_pack_in_host", PACK)
    pack = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pack)
    return pack


def sample_step_overhead_us(classes):
    import nodes
    model = nodes.CheckpointLoaderSimple().load_checkpoint("tiny.safetensors")[0]
    isolated = classes["PatchAttention"]().patch(model=model, scale=1.05)[0]
    return step_overhead_us(isolated, pack_in_host().PatchAttention().patch(model, 1.05)[0])


def pack_model_step_overhead_us(classes):
    isolated = classes["LoadModel"]().load(name="pack-model")[0]
    return step_overhead_us(isolated, pack_in_host().LoadModel().load("pack-model")[0])


def step_overhead_us(isolated, local):
    """Per step, the median sampling time with `isolated` less that with `local`."""
    import nodes
    clip = nodes.CheckpointLoaderSimple().load_checkpoint("tiny.safetensors")[1]
    positive = nodes.CLIPTextEncode().encode(clip, "a cat")[0]
    negative = nodes.CLIPTextEncode().encode(clip, "")[0]
    latent = {"samples": torch.zeros(1, 4, 8, 8)}

    def sample_ms(patched):
        started = time.perf_counter()
        nodes.KSampler().sample(patched, 7, STEPS, 7.5, "euler", "normal", positive, negative, latent)
        return (time.perf_counter() - started) * 1e3

    sample_ms(isolated), sample_ms(local)  # warm both
    isolated_ms, local_ms = [], []
    for _ in range(RUNS):  # interleaved, so that a slow moment of the machine costs both
        isolated_ms.append(sample_ms(isolated))
        local_ms.append(sample_ms(local))
    return (statistics.median(isolated_ms) - statistics.median(local_ms)) * 1e3 / STEPS
