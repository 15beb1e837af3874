"""The remote objects' figures of scripts/bench bridge (docs/BENCHMARKS.md, "Remote objects"),
measured by bridge_host.py against tests/packs/model_pack in its worker:

- remote_call_rtt_us: an empty call of a function of the pack's, from the host (one use of
  a remote object, there and back), p50 and p99;
- pack_model_step_overhead_us: per step of the host's KSampler, the extra time of a MODEL
  the pack loaded (its LoadModel), which the host's sampler has the pack sample
  (crossing/forwarded.py), against the same model loaded in the host's process; the
  median of runs;
- callback_cpu_us: the CPU time of both processes, the host's and the worker's, per use
  of a patch of the pack's (its control net's get_control, as the host's sampler asks for
  residuals each step), beyond the same patch imported into the host's process. The uses
  are those of one node of a host's prompt, a pause as long as a step on a GPU between two
  (PAUSE_S, past the worker's IDLE_AFTER_S): what the worker does between steps is counted.
  Beside it callback_floor_cpu_us, the same for an empty function of the pack's against an
  empty one of the host's: what a use costs with nothing in it; and
  callback_busy_stretches, the busy stretches the worker began during one such node.

And what replica_bench.py measures a pack's patched MODEL with: sample() and step_us()."""

import importlib.util
import os
import statistics
import sys
import time

import torch

CALLS = 5000
WARMUP = 500
STEPS = 20
RUNS = 15
USES = 100                # callback_cpu_us's, in one host node
PAUSE_S = 0.005           # between two of them: a step of a GPU sampler
CPU_ROUNDS = 3            # of each side, interleaved; the median
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
    """tests/packs/model_pack imported into this process, once, as a package (as upstream
    loads a custom node): its relative imports find its modules."""
    found = sys.modules.get("model_pack_in_host")
    if found is None:
        spec = importlib.util.spec_from_file_location("model_pack_in_host", PACK,
                                                      submodule_search_locations=[os.path.dirname(PACK)])
        found = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(found)
    return found


def pack_model_step_overhead_us(classes):
    isolated = classes["LoadModel"]().load(name="pack-model")[0]
    return step_overhead_us(isolated, pack_in_host().LoadModel().load("pack-model")[0])


def callback_cpu_us(classes, link):
    """callback_cpu_us, callback_floor_cpu_us and callback_busy_stretches (above); `link`:
    the host's PackLink of model_pack."""
    conditioning, image = [[torch.zeros(1, 2, 8), {}]], torch.rand(1, 8, 8, 3)
    isolated = classes["OwnControl"]().apply(conditioning=conditioning, image=image, strength=1.0)[0][0][1]["control"]
    local = pack_in_host().OwnControl().apply(conditioning, image, 1.0)[0][0][1]["control"]
    x, t, cond = torch.rand(1, 4, 8, 8), torch.ones(1), {"c_crossattn": torch.zeros(1, 2, 8)}
    (function,) = classes["EmptyFunction"]().make()
    worker_cpu = classes["WorkerCpu"]()
    figures = {}
    for name, isolated_use, local_use in (
            ("callback_cpu_us", lambda: isolated.get_control(x, t, cond, 1, {}),
             lambda: local.get_control(x, t, cond, 1, {})),
            ("callback_floor_cpu_us", function, pack_in_host().nothing)):
        isolated_us, local_us = [], []
        for _ in range(CPU_ROUNDS):
            isolated_us.append(node_cpu_us(isolated_use, worker_cpu))
            local_us.append(node_cpu_us(local_use, worker_cpu))
        figures[name] = (statistics.median(isolated_us) - statistics.median(local_us)) / USES
    before = link.stats().get("busy_stretches", 0)
    time.sleep(PAUSE_S)  # the stretch of the last node call (WorkerCpu's) ends first
    in_one_node(lambda: uses(lambda: isolated.get_control(x, t, cond, 1, {})))
    figures["callback_busy_stretches"] = link.stats().get("busy_stretches", 0) - before
    figures["callback_uses"] = USES
    return figures


def node_cpu_us(use, worker_cpu):
    """The CPU time, host's and worker's together, of one host node that makes USES uses."""
    (worker_before,), host_before = worker_cpu.cpu(), time.process_time()
    in_one_node(lambda: uses(use))
    host_after, (worker_after,) = time.process_time(), worker_cpu.cpu()
    return ((host_after - host_before) + (worker_after - worker_before)) * 1e6


def uses(use):
    for _ in range(USES):
        use()
        time.sleep(PAUSE_S)


def in_one_node(node):
    """`node` run as the one node of a prompt, by upstream's executor (the fake's)."""
    import execution
    execution.PromptExecutor().execute([node], "callback_cpu_us")


_INPUTS = []  # the conditionings and the latent sample() gives the sampler, made once


def sample(model):
    """The host's KSampler over `model`: STEPS steps, a 1x4x8x8 latent, a prompt and an empty one."""
    import nodes
    if not _INPUTS:
        clip = nodes.CheckpointLoaderSimple().load_checkpoint("tiny.safetensors")[1]
        _INPUTS.extend([nodes.CLIPTextEncode().encode(clip, "a cat")[0], nodes.CLIPTextEncode().encode(clip, "")[0],
                        {"samples": torch.zeros(1, 4, 8, 8)}])
    positive, negative, latent = _INPUTS
    return nodes.KSampler().sample(model, 7, STEPS, 7.5, "euler", "normal", positive, negative, latent)


def step_overhead_us(isolated, local):
    """Per step, the median sampling time with `isolated` less that with `local`."""
    isolated_us, local_us = step_us(isolated, local)
    return isolated_us - local_us


def step_us(isolated, local, runs=RUNS):
    """Per step, the median sampling time with `isolated` and with `local`, `runs` of each
    interleaved, so that a slow moment of the machine costs both."""
    def sample_ms(model):
        started = time.perf_counter()
        sample(model)
        return (time.perf_counter() - started) * 1e3

    sample_ms(isolated), sample_ms(local)  # warm both
    isolated_ms, local_ms = [], []
    for _ in range(runs):
        isolated_ms.append(sample_ms(isolated))
        local_ms.append(sample_ms(local))
    return statistics.median(isolated_ms) * 1e3 / STEPS, statistics.median(local_ms) * 1e3 / STEPS
