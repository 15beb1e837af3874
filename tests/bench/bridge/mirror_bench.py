"""The mirrors' figures of scripts/bench bridge (docs/BENCHMARKS.md, "Mirrors"), measured by
bridge_host.py against tests/packs/model_pack in its worker, with a diffusion model of
256 MiB (float32) built by the fake upstream's UNetModel:

- mirror_map_ms_256mib: a node call whose node reads `model.model.diffusion_model` of the
  host's MODEL: the module built in the worker on the meta device and set over the host's
  weights mapped (the descriptor, the description, the mapping), then dropped at the
  node's end; the median of runs;
- copy_ms_256mib: the same node call with the same weights sent in as values instead (each
  tensor written once into the host's arena for the worker, which reads it in place: a
  copy, and the cheapest the bridge makes); the median of runs, interleaved with the above;
- mirror_publish_ms_256mib: the first mirror of the model, which moves the host's weights
  into their memfd once (a copy, once per model) before it maps them."""

import gc
import statistics
import time

import torch

DIM = 3664  # five DIM x DIM float32 matrices and the rest: 256 MiB
RUNS = 8


def mirror_figures(classes, settle):
    """`settle()`: the host takes the worker's releases that came (of the copies' blocks), so
    that neither path pays for the other's clean-up."""
    import comfy.model_base
    import comfy.model_management as mm
    import comfy.model_patcher
    torch.manual_seed(0)
    base = comfy.model_base.model_from_config({"channels": 4, "dim": DIM, "context_dim": DIM, "heads": 4})
    model = comfy.model_patcher.ModelPatcher(base, mm.GPU, mm.CPU)
    nbytes = sum(t.numel() * t.element_size() for t in base.diffusion_model.parameters())
    touch = classes["MirrorTouch"]()
    count = sum(t.numel() for t in base.diffusion_model.parameters())

    def timed_ms(**inputs):
        gc.collect()
        time.sleep(0.05)
        settle()
        started = time.perf_counter()
        (counted,) = touch.touch(**inputs)
        elapsed = (time.perf_counter() - started) * 1e3
        if counted != count:
            raise SystemExit(f"bench: the worker counted {counted} elements of the model, not {count}")
        return elapsed

    publish_ms = timed_ms(model=model)
    weights = dict(base.diffusion_model.named_parameters())
    timed_ms(model=model), timed_ms(weights=weights)  # warm both: the arena's pages, the module's code
    mirror_ms, copy_ms = [], []
    for _ in range(RUNS):  # interleaved, so that a slow moment of the machine costs both
        mirror_ms.append(timed_ms(model=model))
        copy_ms.append(timed_ms(weights=weights))
    return {"mirror_map_ms_256mib": statistics.median(mirror_ms), "copy_ms_256mib": statistics.median(copy_ms),
            "mirror_publish_ms_256mib": publish_ms, "mirror_model_bytes": nbytes}
