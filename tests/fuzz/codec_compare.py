"""The bridge's C++ codec (worker/python_codec) against its reference, values.py's Python
codec, on the same inputs, seeded:

- random values, of everything that crosses and much that does not (subclasses of int,
  float, str and dict, sets, tensors of every dtype and layout, in the frame and in the
  arena, the same tensor twice, handles), encoded by both: the same JSON text (keys in the
  same order, the same blocks written with the same bytes, the same handles asked for);
- the encoded values and the bridge fuzzer's corpus (tests/fuzz/corpus/bridge_values),
  mutated JSON-wise and byte-wise (python_fuzzer.Mutator) into malformed frames, and
  decoded by both: equal values (dtypes, shapes, strides and bytes of tensors) and the same
  blocks released in the same order, or the same ValueCrossingError, message and all.

    codec_compare.py [--values N] [--frames N] [--seed S]

It fails where the codec is not loaded: COMFY_BRIDGE_CODEC names the module under test. And
first, each in a process of its own: the codec is looked for when the first encoder is made,
not when values.py is imported (a warm template imports it before a worker's life sets the
environment that says where the codec is); a module that does not load leaves the Python
codec, with one line that says so.
"""

import argparse
import collections
import enum
import glob
import json
import os
import random
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "..", "..", "worker", "python")
sys.path.insert(0, PACKAGE)
sys.path.insert(0, HERE)

import torch  # noqa: E402
from comfy_supervisor.bridge import arena, values  # noqa: E402

from python_fuzzer import Mutator  # noqa: E402

ARENA_BYTES = 1 << 20
CORPUS = os.path.join(HERE, "corpus", "bridge_values")
WORDS = ["$", "tensor", "tuple", "dict", "set", "handle", "items", "dtype", "shape", "offset", "nbytes", "device",
         "cuda", "yours", "at", "inline", "n", "strides", "uuid", "hex", "enum", "value", "name", "type", "index",
         *values.DTYPES, "cpu", "float8_e5m2", "AAAA", "AA==", "=", "value", "inputs"]


class Mode(enum.IntEnum):
    ONE = 1


class Float(float):
    pass


class Text(str):
    pass


class Kept:
    """An object that stays with its maker: crosses as a handle."""


class Failure(Exception):
    pass


def random_tensor(rng):
    dtype = getattr(torch, rng.choice(values.DTYPES))
    shape = [rng.choice((0, 1, 2, 3, 5, 8)) for _ in range(rng.randint(0, 3))]
    if rng.random() < 0.15:
        shape = [rng.choice((33, 64, 700))] + shape[:1]  # past INLINE_BYTES: in the arena
    generator = torch.Generator().manual_seed(rng.getrandbits(32))
    tensor = (torch.rand(shape, generator=generator) * 100).to(dtype) if dtype != torch.bool else \
        torch.rand(shape, generator=generator) > 0.5
    shape_of = rng.random()
    if shape_of < 0.15 and tensor.dim() >= 2:
        tensor = tensor.transpose(0, 1)                  # a permutation: written with its strides
    elif shape_of < 0.25 and tensor.dim() >= 1 and tensor.shape[0] > 1:
        tensor = tensor[::2]                             # not dense: made contiguous to cross
    elif shape_of < 0.3 and tensor.is_complex():
        tensor = tensor.conj()
    elif shape_of < 0.35 and dtype in (torch.float32, torch.int64):
        tensor = torch._neg_view(tensor)
    elif shape_of < 0.4:
        tensor = torch.nn.Parameter(tensor, requires_grad=False) if tensor.is_floating_point() else tensor
    return tensor


def random_value(rng, depth, tensors):
    if depth > 4 or rng.random() < 0.35:
        leaf = rng.randrange(14)
        if leaf == 0:
            return rng.choice((None, True, False))
        if leaf == 1:
            return rng.choice((0, -1, 7, 1 << 40, 1 << 70, -(1 << 64)))
        if leaf == 2:
            return rng.choice((0.5, -0.0, 1e300, float("inf"), float("nan")))
        if leaf == 3:
            return rng.choice(("", "$", "a", "é☃", "tensor"))
        if leaf == 4:
            return rng.choice((Mode.ONE, Float(2.5), Text("sub"), True))
        if leaf in (5, 6, 7):
            tensor = random_tensor(rng)
            tensors.append(tensor)
            return tensor
        if leaf == 8 and tensors:
            return rng.choice(tensors)  # the same tensor again in one value
        if leaf == 9:
            return rng.choice((torch.device("cpu"), torch.device("cuda", 1), torch.float16, torch.bool))
        if leaf == 10:
            return uuid.UUID(int=rng.getrandbits(128))
        return Kept()
    kind = rng.randrange(8)
    items = [random_value(rng, depth + 1, tensors) for _ in range(rng.randint(0, 4))]
    if kind == 0:
        return items
    if kind == 1:
        return tuple(items)
    if kind == 2:
        return {rng.choice(("a", "b", "c", "$x", "")) + str(i): item for i, item in enumerate(items)}
    if kind == 3:
        keys = [rng.choice((1, "$", (1, 2), None, 2.5, "k")) for _ in items]
        return dict(zip(keys, items))
    if kind == 4:
        return set(item for item in items if type(item) in (int, str, float, bool, type(None)))
    if kind == 5:
        return frozenset(rng.choice(((1, 2), "a", 3)) for _ in items)  # a tuple in it: a handle
    if kind == 6:
        ordered = collections.OrderedDict((f"k{i}", item) for i, item in enumerate(items))
        if ordered:
            ordered.move_to_end(next(iter(ordered)))
        return ordered
    return [items, {"nested": tuple(items)}]


def canonical(value):
    """A value as plain data that compares equal exactly where two decoded values are the same."""
    if isinstance(value, torch.Tensor):
        raw = bytes(value.detach().contiguous().reshape(-1).view(torch.uint8).numpy()) if value.numel() else b""
        return ("tensor", str(value.dtype), tuple(value.shape), value.stride(), value.device.type, raw)
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [canonical(item) for item in value])
    if isinstance(value, dict):
        return ("dict", [(canonical(key), canonical(item)) for key, item in value.items()])
    if isinstance(value, (set, frozenset)):
        return ("set", sorted(repr(canonical(item)) for item in value))
    return (type(value).__name__, repr(value))


def encoded(value, codec, fd):
    """The JSON text of `value` as the encoder gives it, its blocks' bytes, the handles it
    asked for; or the error it raised."""
    asked = []

    def handle_of(kept):
        asked.append(type(kept).__name__)
        return {"$": "handle", "id": len(asked), "type": type(kept).__name__}
    own = arena.OwnArena(os.dup(fd), ARENA_BYTES)  # unmapped once collected, with the views over it
    encoder = values.Encoder(own, handle_of, codec=codec)
    try:
        text = json.dumps(encoder.encode(value), separators=(",", ":"))
    except Exception as error:  # noqa: BLE001 (whatever the reference raises, ours must too)
        return ("error", type(error).__name__, str(error))
    blocks = [bytes(own.view(offset, 1 << 12)) for offset in encoder.lent]
    return ("ok", text, blocks, asked)


def decoded(message, codec, peer):
    """What a host's decoder makes of `message` over the worker's arena `peer`."""
    released = []
    decoder = values.Decoder(peer, released.append, lambda handle: ("resolved", handle.get("id")), codec=codec)
    try:
        return ("ok", canonical(decoder.decode(message)), released)
    except values.ValueCrossingError as error:
        if "\n" in str(error):
            raise Failure(f"a ValueCrossingError of more than one line: {str(error)[:200]!r}") from None
        return ("error", str(error), released)
    except Exception as error:  # noqa: BLE001
        raise Failure(f"the {'C++' if codec else 'Python'} decoder raised {type(error).__name__}, not "
                      f"ValueCrossingError: {error}") from None


def compare_values(rng, count, fd, corpus):
    for number in range(count):
        value = random_value(rng, 0, [])
        reference, ours = encoded(value, None, fd), encoded(value, values.default_codec(), fd)
        if reference != ours:
            raise Failure(f"value {number}: the encoders differ:\n  python: {str(reference)[:600]}\n"
                          f"  c++:    {str(ours)[:600]}")
        if reference[0] == "ok":
            corpus.append(reference[1].encode())


def bytes_changed(rng, message):
    """`message` with one base64 digit of a tensor in its frame changed for another: a frame
    still well formed, whose bytes say something else (a bool of 2, a NaN)."""
    found = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("inline"), str) and len(node["inline"]) > 4:
                found.append(node)
            for item in node.values():
                walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)
    walk(message)
    if found:
        tensor = rng.choice(found)
        at = rng.randrange(len(tensor["inline"]) - 4)
        digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        tensor["inline"] = tensor["inline"][:at] + rng.choice(digits) + tensor["inline"][at + 1:]
    return message


def compare_frames(rng, count, peer, corpus):
    mutator = Mutator(rng, WORDS, 64 << 10)
    refused = 0
    for number in range(count):
        data = mutator.mutate(rng.choice(corpus), corpus) if rng.random() < 0.8 else rng.choice(corpus)
        try:
            message = json.loads(data)
        except (ValueError, RecursionError):
            continue
        if rng.random() < 0.3:
            message = bytes_changed(rng, message)
        for part in (message, *(message.values() if isinstance(message, dict) else ())):
            reference, ours = decoded(part, None, peer), decoded(part, values.default_codec(), peer)
            if reference != ours:
                raise Failure(f"frame {number}: the decoders differ on {data[:400]!r}:\n"
                              f"  python: {str(reference)[:600]}\n  c++:    {str(ours)[:600]}")
            refused += reference[0] == "error"
    return refused


def worker_arena():
    """A 1 MiB arena, as a worker's encoder wrote tensors of every dtype into it, whose
    memfd is read by the decoders' CopiedArena."""
    fd = os.memfd_create("codec-compare-arena")
    os.ftruncate(fd, ARENA_BYTES)
    own = arena.OwnArena(os.dup(fd), ARENA_BYTES)
    generator = torch.Generator().manual_seed(7)
    encoder = values.Encoder(own, lambda kept: None, codec=None)
    encoder.encode([torch.rand(2, 32, 32, 3, generator=generator), torch.rand(9000, generator=generator) > 0.5,
                    *(torch.ones(values.INLINE_BYTES + 4, dtype=getattr(torch, dtype)) for dtype in values.DTYPES)])
    return fd


def found_at_first_use(module):
    """Whether a process that imported values.py while its environment said "python" uses
    the codec at `module` once its environment names it, as a worker forked from a template."""
    script = ("import os, sys\n"
              "from comfy_supervisor.bridge import values\n"
              "os.environ['COMFY_BRIDGE_CODEC'] = sys.argv[1]\n"
              "print(values.Encoder(None, None).codec is not None)\n")
    run = subprocess.run([sys.executable, "-c", script, module], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, COMFY_BRIDGE_CODEC="python", PYTHONPATH=PACKAGE))
    return run.stdout.strip() == "True"


def falls_back_saying_so():
    """Whether a module that does not load leaves the Python codec, with one line that says so."""
    script = "from comfy_supervisor.bridge import values\nprint(values.default_codec() is None)\n"
    junk = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"codec-compare-{os.getpid()}.abi3.so")
    with open(junk, "wb") as module:
        module.write(b"not a shared object")
    try:
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, COMFY_BRIDGE_CODEC=junk, PYTHONPATH=PACKAGE))
    finally:
        os.remove(junk)
    lines = run.stderr.strip().splitlines()
    return run.stdout.strip() == "True" and len(lines) == 1 and "does not load here" in lines[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", type=int, default=3000)
    parser.add_argument("--frames", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 32))
    options = parser.parse_args()
    print(f"seed {options.seed}")
    if values.default_codec() is None:
        print(f"fail: the C++ codec was not loaded (COMFY_BRIDGE_CODEC={os.environ.get('COMFY_BRIDGE_CODEC')!r}); build the "
              "target comfy_bridge_codec")
        return 1
    if not found_at_first_use(values.default_codec().__file__):
        print("fail: a process that imported values.py before its environment named the codec does not use it")
        return 1
    if not falls_back_saying_so():
        print("fail: a codec module that does not load is not left for the Python codec with one line saying so")
        return 1
    rng = random.Random(options.seed)
    fd = worker_arena()
    scratch = os.memfd_create("codec-compare-encoder")
    os.ftruncate(scratch, ARENA_BYTES)
    corpus = []
    for path in sorted(glob.glob(os.path.join(CORPUS, "*.json"))):
        with open(path, "rb") as source:
            corpus.append(source.read())
    peer = arena.CopiedArena(os.dup(fd))
    try:
        compare_values(rng, options.values, scratch, corpus)
        refused = compare_frames(rng, options.frames, peer, corpus)
    except Failure as failure:
        print(f"fail (seed {options.seed}): {failure}")
        return 1
    finally:
        peer.close()
        os.close(fd)
        os.close(scratch)
    print(f"ok: {options.values} values encoded alike, {options.frames} frames decoded alike "
          f"({refused} parts refused alike)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
