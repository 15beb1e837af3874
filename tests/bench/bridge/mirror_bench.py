"""The replica's map figures of scripts/bench bridge (docs/BENCHMARKS.md, "Mirrors" and
"Replicas"), measured by bridge_host.py against tests/packs/model_pack in its worker, with
a host MODEL whose diffusion model is 256 MiB (float32) built by the fake upstream's
UNetModel from its model configuration (model_base.model_from_config):

- replica_map_ms_256mib: a node call (ReplicaTouch) given the host's MODEL, which arrives
  as a replica: its recipe asked of the host, upstream's ModelPatcher and BaseModel built
  on the meta device, the diffusion model's kept mirror mapped (the descriptor, the
  description, the mapping), its elements counted; all of it dropped at the node's end,
  so each run builds and maps its own; the median of runs;
- copy_ms_256mib: the same weights sent to a node (MirrorTouch) as values instead (each
  tensor written once into the host's arena for the worker, which reads it in place: a
  copy, and the cheapest the bridge makes; each weight written in place before, untimed,
  so that it is a first crossing, not a block kept from the last); the median of runs,
  interleaved with the above;
- replica_publish_ms_256mib: the first replica of the model in the worker, whose mirror
  copies the host's weights into that worker's memfd once (a copy, once per model and
  worker) before it maps them.

Before replicas (issue 35) a node given a MODEL read its diffusion model through a proxy,
a mirror made for one node call: the same map, without the replica's build
(mirror_map_ms_256mib then)."""

import gc
import statistics
import time

import torch

DIM = 3664  # five DIM x DIM float32 matrices and the rest: 256 MiB
RUNS = 8


def replica_map_figures(classes, settle):
    """`settle()`: the host takes the worker's releases that came (of the copies' blocks), so
    that neither path pays for the other's clean-up."""
    import comfy.model_base
    import comfy.model_management as mm
    import comfy.model_patcher
    torch.manual_seed(0)
    base = comfy.model_base.model_from_config({"channels": 4, "dim": DIM, "context_dim": DIM, "heads": 4})
    model = comfy.model_patcher.ModelPatcher(base, mm.GPU, mm.CPU)
    nbytes = sum(t.numel() * t.element_size() for t in base.diffusion_model.parameters())
    count = sum(t.numel() for t in base.diffusion_model.parameters())
    replica, copied = classes["ReplicaTouch"](), classes["MirrorTouch"]()

    def ready(**inputs):
        if "model" not in inputs:
            return copied.touch(**inputs)[0]
        counted, kind, fresh = replica.touch(**inputs)
        if kind != "ReplicaPatcher" or not fresh:
            raise SystemExit(f"bench: the host's MODEL arrived in the worker as a {'new' if fresh else 'kept'} "
                             f"{kind}, not a new replica")
        return counted

    def timed_ms(**inputs):
        if "weights" in inputs:  # a write torch counts, so that the host copies them again, not its kept blocks
            with torch.no_grad():
                for weight in inputs["weights"].values():
                    weight.view(-1)[:1].add_(0)
        gc.collect()
        time.sleep(0.05)
        settle()
        started = time.perf_counter()
        counted = ready(**inputs)
        elapsed = (time.perf_counter() - started) * 1e3
        if counted != count:
            raise SystemExit(f"bench: the worker counted {counted} elements of the model, not {count}")
        return elapsed

    publish_ms = timed_ms(model=model)
    weights = dict(base.diffusion_model.named_parameters())
    timed_ms(model=model), timed_ms(weights=weights)  # warm both: the arena's pages, the module's code
    replica_ms, copy_ms = [], []
    for _ in range(RUNS):  # interleaved, so that a slow moment of the machine costs both
        replica_ms.append(timed_ms(model=model))
        copy_ms.append(timed_ms(weights=weights))
    return {"replica_map_ms_256mib": statistics.median(replica_ms), "copy_ms_256mib": statistics.median(copy_ms),
            "replica_publish_ms_256mib": publish_ms, "replica_model_bytes": nbytes}
