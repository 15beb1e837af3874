"""How CUDA tensors cross between the host and a pack's worker (comfy_supervisor.bridge's
values and cuda_ipc), for scripts/gpu-check. Two parts:

- staging: in one process over a real sealed memfd arena, read as the two sides read it
  (a worker in place, the host by copying), a CUDA tensor written once into the arena
  comes out on the receiver's CUDA device, bit-exact; where this torch has no CUDA, the
  fallback: it stays on the CPU, bit-exact.
- IPC (only where torch has CUDA): a real second process plays the worker, with real
  sessions over a socket pair and two arenas, as the supervisor would hand them out. The
  host's CUDA tensors reach the worker by CUDA IPC, over the host's own memory (no copy);
  the worker sends one back unchanged (the host gets its own memory again) and a new one
  (the host gets a copy on its device); bit-exact both ways; and once both sides let go,
  neither lends anything.

Prints one line per case and "cuda-values: N passed, M failed"; exit status 1 on any
failure."""

import fcntl
import hashlib
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "worker", "python"))

import torch  # noqa: E402
from check_report import CheckReport  # noqa: E402
from comfy_supervisor.bridge.arena import CopiedArena, OwnArena, PeerArena  # noqa: E402
from comfy_supervisor.bridge.session import PeerSession  # noqa: E402
from comfy_supervisor.bridge.values import Decoder, Encoder  # noqa: E402

ARENA_BYTES = 256 << 20
REPLY_WAIT_S = 60


def sealed_arena():
    """A producer's arena fd (writable) and the read-only fd its peer gets."""
    fd = os.memfd_create("cuda-values", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, ARENA_BYTES)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd, os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)


def digest(tensor):
    return hashlib.sha256(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


def cases(device):
    return {"float16 image": torch.rand(1, 256, 256, 3, device=device).half(),
            "bfloat16 latent": torch.randn(2, 4, 32, 32, device=device).to(torch.bfloat16),
            "strided float32": torch.randn(64, 64, device=device).t(),
            "channels-last image": torch.rand(1, 32, 32, 3, device=device).movedim(-1, 1),
            "int64": torch.arange(1000, device=device)}


def check_staging(results, cuda):
    own_fd, read_only = sealed_arena()
    own = OwnArena(own_fd, ARENA_BYTES)
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    for reader, peer in (("a worker", PeerArena(os.dup(read_only))), ("the host", CopiedArena(os.dup(read_only)))):
        for name, tensor in cases(device).items():
            encoder = Encoder(own, handle_of=None)  # no CUDA IPC: staged
            encoded = encoder.encode(tensor)
            back = Decoder(peer, lambda offset: None, resolve=None).decode(encoded)
            expected = "cuda" if cuda else "cpu"
            results.check(back.device.type == expected and back.dtype == tensor.dtype and
                          torch.equal(back.cpu(), tensor.cpu()) and back.stride() == tensor.stride(),
                          f"staged {name} to {reader}: sent from {tensor.device}, {encoded['nbytes']} arena bytes, "
                          f"received on {back.device}")
            del back
            for offset in encoder.lent:
                own.free(offset)
    os.close(read_only)


class NoObjects:
    """The sessions of these checks carry plain values and tensors only: no remote objects
    (a session's releases and its end reach its conversation, which this stands for)."""

    def tag_of(self, value):
        return None

    def on_release(self, objects):
        pass

    def close(self):
        pass


class Session(PeerSession):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.remote = NoObjects()

    def on_message(self, message):
        self.last = message


def next_reply(session):
    """The next message that is not the session's own (releases, the CUDA handshake)."""
    session.last = None
    while session.last is None:
        message = session.next_message(REPLY_WAIT_S)
        if not message:
            raise RuntimeError("the worker process went away or did not answer")
        session.dispatch(message)
    return session.last


def settle(session, condition):
    """Reads the peer's releases until `condition()` or a quiet second."""
    while not condition():
        message = session.next_message(1.0)
        if not message:
            return
        session.dispatch(message)


def check_ipc(results):
    torch.cuda.init()
    torch.empty(1, device="cuda")  # torch's CUDA in use, as in ComfyUI: its device is probed
    host_end, worker_end = socket.socketpair()
    host_arena, host_read_only = sealed_arena()
    worker_arena, worker_read_only = sealed_arena()
    fds = [worker_end.fileno(), worker_arena, host_read_only]
    worker = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", *map(str, fds)], pass_fds=fds)
    worker_end.close()
    session = Session(host_end, CopiedArena(worker_read_only), OwnArena(host_arena, ARENA_BYTES), 1, "host",
                      copy_received=True)
    try:
        sent = cases(torch.device("cuda", 0))
        encoder = session.encoder(handle_of=None)
        encoded = encoder.encode(sent)
        session.lend(encoder)
        by_ipc = [name for name, value in encoded.items() if "cuda_ipc" in value]
        results.check(len(by_ipc) == len(sent), f"the host's CUDA tensors went by IPC: {by_ipc}")
        session.channel.send({"op": "call", "id": 1, "inputs": encoded,
                              "digests": {name: digest(value) for name, value in sent.items()}})
        reply = next_reply(session)
        for line, ok in reply.get("checks", []):
            results.check(ok, f"in the worker: {line}")
        value = reply["value"]
        results.check("yours_cuda" in value["echo"] and "cuda_ipc" in value["made"],
                      "the worker sent the host's tensor back as the host's own and its new one by IPC")
        back = session.decoder(resolve=None).decode(value)
        echo, made = back["echo"], back["made"]
        original = sent["float16 image"]
        results.check(echo.data_ptr() == original.data_ptr() and torch.equal(echo, original),
                      "the tensor sent back is the host's own memory, unchanged")
        results.check(made.is_cuda and digest(made) == reply["made_digest"],
                      f"the worker's new tensor arrived bit-exact on {made.device}, a copy the host owns")
        del sent, encoded, back, echo, made, original
        session.channel.send({"op": "done", "id": 2})
        final = next_reply(session)
        results.check(final.get("cuda_lent") == 0, f"the worker lends nothing once the host let go ({final})")
        settle(session, lambda: not session.cuda.lent)
        results.check(not session.cuda.lent, f"the host lends nothing once the worker let go ({len(session.cuda.lent)})")
    finally:
        session.close()
        worker.wait(REPLY_WAIT_S)


def over_mapping(session, tensor):
    return any(address <= tensor.data_ptr() < address + size for address, size in session.cuda.mapped.values())


def worker_main(sock_fd, own_fd, peer_fd):
    """The worker's side of check_ipc."""
    torch.cuda.init()
    torch.empty(1, device="cuda")
    session = Session(socket.socket(fileno=sock_fd), PeerArena(peer_fd), OwnArena(own_fd, ARENA_BYTES), 1, "worker",
                      copy_received=False)
    call = next_reply(session)
    inputs = session.decoder(resolve=None).decode(call["inputs"])
    checks = [(f"{name} arrived bit-exact on {tensor.device}, over the host's memory",
               tensor.is_cuda and digest(tensor) == call["digests"][name] and over_mapping(session, tensor))
              for name, tensor in inputs.items()]
    made = inputs["bfloat16 latent"] * 2
    encoder = session.encoder(handle_of=None)
    value = encoder.encode({"echo": inputs["float16 image"], "made": made})
    session.lend(encoder)
    session.channel.send({"op": "result", "id": 1, "value": value, "checks": checks, "made_digest": digest(made)})
    del inputs, made, value
    next_reply(session)  # done
    settle(session, lambda: not session.cuda.lent)
    session.channel.send({"op": "stats", "id": 3, "cuda_lent": len(session.cuda.lent)})
    session.close()


def main():
    if sys.argv[1:2] == ["--worker"]:
        worker_main(*map(int, sys.argv[2:5]))
        return 0
    results = CheckReport("cuda-values")
    cuda = torch.cuda.is_available()
    print(f"cuda-values: torch {torch.__version__}, " +
          (f"CUDA device 0: {torch.cuda.get_device_name(0)}" if cuda else "no CUDA in this torch: the fallback path"))
    check_staging(results, cuda)
    if cuda:
        check_ipc(results)
    else:
        print("SKIP IPC: no CUDA in this torch, so CUDA tensors are staged as above")
    return results.finish()


if __name__ == "__main__":
    sys.exit(main())
