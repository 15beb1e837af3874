"""How a CUDA tensor crosses between the host and a pack's worker (comfy_supervisor.values),
for scripts/gpu-check: written once into the sender's arena (host staging) and rebuilt on
the receiver's CUDA device, bit-exact; or, where this torch has no CUDA, the fallback: the
receiver keeps the staged tensor on the CPU, still bit-exact. One process plays both
sides over a real sealed memfd arena, mapped as the two sides map it. Prints one line per
case and "cuda-values: N passed, M failed"; exit status 1 on any failure."""

import fcntl
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "worker", "python"))

import torch  # noqa: E402
from comfy_supervisor.arena import OwnArena, PeerArena  # noqa: E402
from comfy_supervisor.values import Decoder, Encoder  # noqa: E402

ARENA_BYTES = 256 << 20


def arena_pair():
    """The producer's arena (shared, writable) and the consumer's view of it (private,
    from a read-only descriptor), as the supervisor hands them out."""
    fd = os.memfd_create("cuda-values", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, ARENA_BYTES)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    read_only = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)
    return OwnArena(fd, ARENA_BYTES), PeerArena(read_only)


def main():
    own, peer = arena_pair()
    released = []
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    print(f"cuda-values: torch {torch.__version__}, " +
          (f"CUDA device 0: {torch.cuda.get_device_name(0)}" if cuda else "no CUDA in this torch: the fallback path"))
    cases = {"float16 image": torch.rand(1, 256, 256, 3, device=device).half(),
             "bfloat16 latent": torch.randn(2, 4, 32, 32, device=device).to(torch.bfloat16),
             "strided float32": torch.randn(64, 64, device=device).t(),
             "int64": torch.arange(1000, device=device)}
    results = []
    for name, tensor in cases.items():
        encoder = Encoder(own, handle_of=None)
        encoded = encoder.encode(tensor)
        back = Decoder(peer, released.append, resolve=None).decode(encoded)
        expected_device = "cuda" if cuda else "cpu"
        ok = back.device.type == expected_device and back.dtype == tensor.dtype and \
            torch.equal(back.cpu(), tensor.cpu())
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'} {name}: sent from {tensor.device}, staged in {encoded['nbytes']} arena "
              f"bytes, received on {back.device}{'' if ok else ' (not bit-exact, or on the wrong device)'}")
        del back
        for offset in encoder.lent:
            own.free(offset)
    print(f"cuda-values: {sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
