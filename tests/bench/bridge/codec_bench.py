"""The values' codec alone, in the benchmark's host (docs/BENCHMARKS.md, "The codec in C
(issue 37)"): codec_us, the time of what both sides' codecs do for one round trip, each with
values.py's Python codec and with the C++ one (worker/python_codec), measured in turns in one
process, so that both meet the same machine; beside each, its ratio. The round trips:

- echo_1kib: Echo of a 1 KiB float32 tensor (the host encodes the inputs, the worker decodes
  them and encodes its output, the tensor in its frame, and the host decodes that);
- empty_use: an empty use of a pack's function (its payload [[], {}, None] and None back);
- get_control: a use of a pack's control net's get_control, as callback_cpu_us makes it
  (three tensors and a dict in; its output, a dict of lists of tensors, back).

The frames as JSON are not in it: json's own C encoder and decoder write and read them.
"""

import statistics
import time

import torch
from comfy_supervisor.bridge import values

ROUNDS = 15
CALLS = 300


class Arena:
    """Where a tensor over INLINE_BYTES would go: these values' tensors all go in their frames."""
    capacity = 1 << 30


def round_trips():
    x, t, cond = torch.rand(1, 4, 8, 8), torch.ones(1), {"c_crossattn": torch.zeros(1, 2, 8)}
    control = {"input": [], "middle": [torch.rand(1, 8, 8)], "output": []}
    return {"echo_1kib": ({"value": torch.rand(256)}, (torch.rand(256),)),
            "empty_use": ([[], {}, None], None),
            "get_control": ([[x, t, cond, 1, {}], {}, None], control)}


def one_way(value, codec):
    encoded = values.Encoder(Arena(), lambda kept: None, codec=codec).encode(value)
    return values.Decoder(Arena(), lambda block: None, lambda handle: None, codec=codec).decode(encoded)


def figures():
    codecs = {"python": None, "cxx": values.default_codec()}
    if codecs["cxx"] is None:
        return {"codec_us": None}
    result = {}
    for name, (there, back) in round_trips().items():
        samples = {codec: [] for codec in codecs}
        for _ in range(ROUNDS):
            for codec_name, codec in codecs.items():
                started = time.perf_counter()
                for _ in range(CALLS):
                    one_way(there, codec)
                    one_way(back, codec)
                samples[codec_name].append((time.perf_counter() - started) * 1e6 / CALLS)
        python, cxx = statistics.median(samples["python"]), statistics.median(samples["cxx"])
        result[name] = {"python": python, "cxx": cxx, "python_vs_cxx": python / cxx}
    return {"codec_us": result}
