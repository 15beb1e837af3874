"""Fuzz target bridge_values: any bytes as one frame a peer sends on a call socket, read and
decoded as the host and a pack's worker read and decode them (worker/python/comfy_supervisor/
bridge: channel.py's frames, session.py's own messages, values.py's Decoder), with real
arenas and real sessions behind them. The promises:

- the frame reads as a JSON object, or raises ProtocolError (one line);
- a session's own message (release, cuda_hello, cuda_accepts) is taken or ignored, never
  raises;
- the whole message decodes, on the host's side (copying from the worker's arena, with
  blocks of its own lent to the worker) and on the worker's (reading the host's arena in
  place), to a value made only of plain values, tuples, dicts, tensors of the dtypes that
  cross (a bool's bytes 0 or 1) and handles; or raises ValueCrossingError (one line);
- the host copies no byte twice for one message, so that it copies at most the arenas;
- nothing else: no other exception, no hang (10 s), no runaway memory (2 GiB).

    fuzz_bridge_values.py [--seconds N] [--seed S] [--work DIR] [--crashes DIR] CORPUS...
    fuzz_bridge_values.py --replay PATH...
    fuzz_bridge_values.py --write-corpus DIR

--write-corpus writes the committed corpus (tests/fuzz/corpus/bridge_values/): valid
messages, encoded by the bridge's own Encoder over the arenas this target sets up.
"""

import gc
import json
import os
import socket
import struct
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "..", "..", "worker", "python")
sys.path.insert(0, PACKAGE)
sys.path.insert(0, HERE)

import torch  # noqa: E402
from comfy_supervisor import crossing  # noqa: E402
from comfy_supervisor.bridge import arena, channel, conversation, session, values  # noqa: E402

from python_fuzzer import Finding, main  # noqa: E402

crossing.install()  # what crosses, and how, as the host's and a worker's start give it

ARENA_BYTES = 1 << 20
WORDS = ["$", "tensor", "tuple", "dict", "handle", "items", "dtype", "shape", "offset", "nbytes", "device", "cuda",
         "yours", "at", "inline", "n", "strides", "cuda_ipc", "yours_cuda", "lend", "id", "type", "op", "result",
         "release", "blocks", "handles", "instances", "cuda_hello", "probes", "cuda_accepts", "devices", "value",
         "inputs", *values.DTYPES, "object", "float8"]


class Sink:
    """The far end of a session's socket: whatever the session sends (releases, its CUDA
    probe and answers) is read and dropped, so that no send ever waits."""

    def __init__(self):
        self.near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        threading.Thread(target=self.drain, args=(far,), daemon=True).start()

    @staticmethod
    def drain(far):
        while far.recv(1 << 16):
            pass


class CountedCopies(arena.CopiedArena):
    """The worker's arena as the host reads it, keeping what it copied for one message
    (`copied`: (offset, size) of each block; the host's own blocks sent back are in
    `own_copied`), so that a byte copied twice for one message is found: a message's
    copies are bounded by the arenas only as long as none is."""
    copied, own_copied = [], []

    def take(self, offset, nbytes, on_release):
        block = super().take(offset, nbytes, on_release)
        CountedCopies.copied.append((offset, nbytes))
        return block

    @classmethod
    def check(cls):
        for name, copies in (("the worker's arena", cls.copied), ("its own arena", cls.own_copied)):
            copies.sort()
            for (offset, nbytes), (next_offset, _) in zip(copies, copies[1:]):
                if offset + nbytes > next_offset:
                    raise Finding(f"the host copied bytes {next_offset} to {offset + nbytes} of {name} twice "
                                  "for one message: its copies are not bounded by the arena")


class CountedOwn(arena.OwnArena):
    """The host's own arena, keeping what it copied of blocks sent back (CountedCopies)."""

    def copy(self, offset, nbytes):
        CountedCopies.own_copied.append((offset, nbytes))
        return super().copy(offset, nbytes)


class Side(session.PeerSession):
    """One side of a session, as the host (copy_received) or a worker has it: the host
    serves the uses of its objects that the lists allow, the worker its own objects."""

    def __init__(self, sock, peer, own, generation, name, copy_received):
        super().__init__(sock, peer, own, generation, name, copy_received)
        self.remote = conversation.Conversation(self, name, enforce=copy_received)

    def on_message(self, message):
        pass

    def ended(self):
        return f"{self.name} ended"


def fixture_tensors():
    """The tensors each side wrote before the inputs: every dtype that crosses, in its
    arena (over values.INLINE_BYTES) and in its frame (the last ones)."""
    generator = torch.Generator().manual_seed(20)
    made = [torch.rand(2, 32, 32, 3, generator=generator), torch.randint(0, 2, (8192,), generator=generator).bool(),
            torch.arange(4096, dtype=torch.int64).reshape(2, 32, 64), torch.zeros(0, 4)]
    for dtype in values.DTYPES:
        made.append(torch.ones(values.INLINE_BYTES + 4, dtype=getattr(torch, dtype)))
    for dtype in values.DTYPES:
        made.append(torch.ones(5, dtype=getattr(torch, dtype)))
    return made


class Sides:
    """The host's side and a worker's of one session, over two fresh arenas: the worker's
    (which the host copies from) holds the fixture's tensors as the worker's encoder wrote
    them, and the host lent the worker blocks of its own arena (some over tensors it still
    holds, one whose tensor is gone)."""

    def __init__(self):
        self.worker_fd, self.host_fd = (os.memfd_create(name) for name in ("fuzz-worker-arena", "fuzz-host-arena"))
        for fd in (self.worker_fd, self.host_fd):
            os.ftruncate(fd, ARENA_BYTES)
        self.build()

    def build(self):
        self.host = Side(Sink().near, CountedCopies(os.dup(self.worker_fd)), CountedOwn(os.dup(self.host_fd)),
                         1, "fuzz host", copy_received=True)
        self.worker = Side(Sink().near, arena.PeerArena(os.dup(self.host_fd)), arena.OwnArena(os.dup(self.worker_fd)),
                           1, "fuzz worker", copy_received=False)
        tensors = fixture_tensors()
        worker_encoder = self.worker.encoder(self.handle)
        self.written = worker_encoder.encode(tensors)  # what the worker sent: the corpus's tensors
        self.held = fixture_tensors()
        host_encoder = self.host.encoder(self.handle)
        self.lent = host_encoder.encode(self.held + [torch.full((2048,), 7.0)])  # the last one's tensor is gone
        self.host.lend(host_encoder)
        self.lent_blocks = set(self.host.lent)

    @staticmethod
    def handle(value):
        return {"$": "handle", "id": id(value) % 1000, "type": type(value).__name__}

    def restore(self):
        """A release the input sent took back what the host had lent: both sides anew, so
        that every input meets the same state."""
        if self.host.lent != self.lent_blocks:
            self.host.close()
            self.host.peer.close()
            self.worker.close()
            self.build()


SIDES = None
FRAMES = None  # (the writing end, the host's Channel reading it)


def resolve_on_worker(handle):
    if handle.get("id") != 1:
        raise values.ValueCrossingError(f"a handle this worker does not hold (id {str(handle.get('id'))[:20]})")
    return Handle()


class Handle:
    """What a handle resolves to in this target."""


def check_valid(value, depth=0):
    """A decoded value is made of what can cross, and nothing else."""
    if depth > values.MAX_DEPTH + 2:
        raise Finding("a decoded value nested deeper than the decoder allows")
    if value is None or isinstance(value, (bool, int, float, str, Handle)):
        return
    if isinstance(value, (list, tuple)):
        for item in value:
            check_valid(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_valid(key, depth + 1)
            check_valid(item, depth + 1)
    elif isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in values.DTYPES:
            raise Finding(f"a decoded tensor of dtype {dtype}")
        raw = value.reshape(-1).view(torch.uint8) if value.numel() else value.reshape(-1)
        if value.dtype is torch.bool and bool((raw > 1).any()):
            raise Finding("a decoded bool tensor with bytes other than 0 and 1")
        raw.clone()  # every byte of it can be read
    else:
        raise Finding(f"a decoded {type(value).__name__}")


def decode(side, message, resolve):
    try:
        value = side.decoder(resolve).decode(message)
    except values.ValueCrossingError as error:
        if "\n" in str(error):
            raise Finding(f"a ValueCrossingError of more than one line: {str(error)[:200]!r}") from None
        return
    check_valid(value)


def one_input(data):
    global SIDES, FRAMES
    if SIDES is None:
        SIDES = Sides()
        writer, reader = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        FRAMES = (writer, channel.Channel(reader))
    writer, frames = FRAMES
    writer.sendall(struct.pack("<I", len(data)) + data)
    try:
        message = frames.receive(timeout_s=5)
    except channel.ProtocolError as error:
        frames.buffer.clear()  # what is left of the frame, for the next input
        if "\n" in str(error):
            raise Finding(f"a ProtocolError of more than one line: {str(error)[:200]!r}") from None
        return
    if not isinstance(message, dict):
        raise Finding(f"a whole frame read as {message!r}")
    if message.get("op") in session.SESSION_OPS:
        for side in (SIDES.host, SIDES.worker):
            side.dispatch(message)
    CountedCopies.copied, CountedCopies.own_copied = [], []
    decode(SIDES.host, message, lambda handle: Handle())
    CountedCopies.check()
    decode(SIDES.worker, message, resolve_on_worker)
    gc.collect(0)  # the worker's views over the host's arena go, and their blocks with them
    SIDES.restore()


def write_corpus(folder):
    """Valid messages, each as a peer would send it, named by what it holds."""
    sides = Sides()
    tensors, lent = sides.written, sides.lent

    def sent_back(entry, at=0, **changes):
        """The host's block `entry` lent, sent back as it came (a part of it with `changes`)."""
        back = {key: item for key, item in entry.items() if key != "offset"}
        return dict(back, yours=entry["offset"], at=at, **changes)
    messages = {
        "result_image": {"op": "result", "id": 1, "value": [tensors[0]]},
        "result_every_dtype": {"op": "result", "id": 2, "value": tensors[4:4 + len(values.DTYPES)]},
        "result_every_dtype_in_frame": {"op": "result", "id": 15, "value": tensors[4 + len(values.DTYPES):]},
        "result_latent": {"op": "result", "id": 3, "value": [{"samples": tensors[0], "batch_index": [0, 1]}]},
        "result_bool_mask": {"op": "result", "id": 4, "value": [tensors[1], tensors[3]]},
        "result_plain": {"op": "result", "id": 5, "value": [3, 0.1, "cba", True, None, [1.5e300, -0.0]]},
        "result_tuple_and_dict": {"op": "result", "id": 6, "value": [
            {"$": "tuple", "items": [1, "two", tensors[2]]},
            {"$": "dict", "items": [[1, "one"], [{"$": "tuple", "items": [2, 3]}, tensors[5]], ["$", "dollar"]]}]},
        "result_handle": {"op": "result", "id": 7, "value": [{"$": "handle", "id": 1, "type": "Model"}]},
        # The image, whose tensor the host holds, and the last, whose tensor is gone.
        "result_sent_back": {"op": "result", "id": 8, "value": [sent_back(lent[0]), sent_back(lent[-1])]},
        "result_sent_back_parts": {"op": "result", "id": 9, "value": [
            sent_back(lent[0], 96, shape=[8, 3], nbytes=96), sent_back(lent[0], 96, shape=[8, 3], nbytes=96),
            sent_back(lent[-1], 8, shape=[2], nbytes=8, dtype="int32")]},
        "call_inputs": {"op": "call", "id": 10, "node": "InvertImage", "kind": "function",
                        "inputs": {"image": tensors[0], "strength": 0.5}, "epoch": 3, "client_id": "browser-1"},
        "progress": {"op": "progress", "id": 11, "value": 5, "total": 20},
        "ui": {"op": "ui", "event": "pack.preview", "data": {"text": "hello", "node": "7"}, "sid": "browser-1"},
        "error": {"op": "error", "id": 12, "type": "RuntimeError", "message": "boom", "traceback": "...",
                  "interrupted": False, "oom": False},
        "release": {"op": "release", "blocks": [arena.PAGE], "cuda": [], "handles": [1], "instances": [2]},
        "cuda_hello": {"op": "cuda_hello", "probes": {"GPU-00000000-0000-0000-0000-000000000000": "00" * 64}},
        "cuda_accepts": {"op": "cuda_accepts", "devices": ["GPU-00000000-0000-0000-0000-000000000000"]},
        "cuda_tensor": {"op": "result", "id": 13, "value": [
            {"$": "tensor", "dtype": "float32", "shape": [4], "nbytes": 16, "device": "cuda",
             "cuda_ipc": {"handle": "00" * 64, "device": "GPU-0", "at": 0, "lend": 7}}]},
        "nested": {"op": "result", "id": 14, "value": [[[[[{"a": [[[1]]]}]]]]]},
    }
    os.makedirs(folder, exist_ok=True)
    for name, message in messages.items():
        with open(os.path.join(folder, name + ".json"), "w") as file:
            json.dump(message, file, separators=(",", ":"))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write-corpus":
        write_corpus(sys.argv[2])
        sys.exit(0)
    sys.exit(main(one_input, WORDS, [os.path.join(PACKAGE, "comfy_supervisor", "bridge")]))
