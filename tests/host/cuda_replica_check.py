"""A CUDA module's mirror between two real processes (bridge/mirror.py, bridge/cuda_mirror.py):
the host's diffusion model reaches a worker as a kept mirror (a replica's), an unload at the
host revokes it and waits for the worker to let go, and a later use maps it again.

The owner is this process, the reader a real second one, with real sessions over a socket
pair and two arenas, as the supervisor hands them out. With a GPU (scripts/gpu-check) the
module lies on cuda:0 and its tensors cross by CUDA IPC: the reader's weights lie over the
host's memory (no copy), its forward is bit-equal to the host's, and once the unload that
waited for the reader moved the module to the CPU, torch.cuda.memory_allocated in the host
is down by at least the weights' bytes. Without one (CTest), the same grant goes through
the same revocation protocol with its tensors staged through the arena, as CUDA tensors are
where IPC cannot go: what needs the GPU (the IPC mapping, memory freed on the device) is
said in one WARN line and left to scripts/gpu-check.

    grant         the reader's forward over the granted weights is bit-equal to the owner's
    unload        the owner's unload revokes the grant while the reader is busy elsewhere (not
                  reading its socket); the reader's watch drops its mirror (meta tensors) and
                  lets go; the unload returns without ending the session; no grant of the
                  module is made while it runs
    again         the reader's next use maps the kept mirror again in place, bit-equal
    cut           a revocation while a forward runs over the mirror: the forward raises one
                  line, and the owner's wait ends
    kept          a reader that keeps its watch open past a revocation: the owner's wait ends
                  at its bound, one log line names the session, and the session is ended;
                  what was lent for it is held until the reader's process is gone

Prints one line per check and "cuda-replica: N passed, M failed"; exit status 1 on any failure."""

import fcntl
import logging
import os
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "fake_comfyui"), os.path.join(HERE, "..", "..", "worker", "python")]

import comfy.model_base  # noqa: E402
import torch  # noqa: E402
from check_report import CheckReport  # noqa: E402
from comfy_supervisor import crossing  # noqa: E402
from comfy_supervisor.bridge import cuda_mirror, mirror, rules  # noqa: E402
from comfy_supervisor.bridge.arena import OwnArena, PeerArena  # noqa: E402
from comfy_supervisor.bridge.remote import RemoteError  # noqa: E402
from comfy_supervisor.bridge.session import PeerSession  # noqa: E402
from comfy_supervisor.crossing import mirror_recipes  # noqa: E402
from cuda_values_check import NoObjects  # noqa: E402

ARENA_BYTES = 64 << 20
REPLY_WAIT_S = 120  # a lost process, not a slow one: every wait below is for an event
CONFIG = {"channels": 4, "dim": 256, "context_dim": 64, "heads": 4}
WHAT = "the host's DIFFUSION_MODEL's diffusion_model"


def sealed_arena():
    fd = os.memfd_create("cuda-replica", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, ARENA_BYTES)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd, os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)


def device():
    return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")


def forward(unet):
    generator = torch.Generator().manual_seed(3)
    inputs = (torch.randn(1, 4, 8, 8, generator=generator), torch.tensor([500.0]),
              torch.randn(1, 3, 64, generator=generator))
    with torch.no_grad():
        return unet(*(t.to(device()) for t in inputs)).cpu()


class Session(PeerSession):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.remote = NoObjects()
        self.inbox = []
        self.inbox_lock = threading.Lock()

    def on_message(self, message):
        with self.inbox_lock:
            self.inbox.append(message)

    def take(self, *ops):
        """The first message of one of `ops` that came, or None."""
        with self.inbox_lock:
            found = next((message for message in self.inbox if message.get("op") in ops), None)
            if found is not None:
                self.inbox.remove(found)
        return found

    def read_some(self):
        """Reads and dispatches for a moment (another thread of ours may read too); False
        once the peer is gone."""
        with self.read_lock:
            message = self.next_message(0.05)
        if message:
            self.dispatch(message)
        return message is not None

    def object_handle(self, value):
        raise TypeError(f"a {type(value).__name__} does not cross here")

    def ended(self):
        return "the check's session ended"

    def next_op(self, *ops):
        """The next message of one of `ops` (the session's own are dispatched meanwhile)."""
        deadline = time.monotonic() + REPLY_WAIT_S
        while time.monotonic() < deadline:
            found = self.take(*ops)
            if found is not None:
                return found
            if not self.read_some():
                break
        raise RuntimeError(f"the peer went away, or did not answer, while {self.name} waited for {ops}")

    def send_value(self, op, value, **fields):
        encoded, encoder = self.encode(value)
        self.send({"op": op, "value": encoded, **fields})
        self.lend(encoder)


# ---- the owner: this process ----

def grant(session, base):
    """A grant of the diffusion model, as the owner's conversation answers replica_mirror:
    through grant_module where it lies on CUDA; otherwise through the same CUDA grant, its
    tensors staged (the module is on the CPU here)."""
    unet = base.diffusion_model
    recipe = mirror_recipes.recipe_of(base, rules.by_name["DIFFUSION_MODEL"], "diffusion_model", unet)
    grants = session.grants
    if unet.proj_in.weight.is_cuda:
        return grants.grant_module(unet, recipe)
    return grants.cuda.grant(unet, list(mirror._tensors(unet)), recipe, next(grants.keys))


def serve_grants(session, base, stop):
    """Answers the reader's requests for a fresh grant until `stop` is set."""
    while not stop.is_set() and session.read_some():
        while session.take("renew") is not None:
            try:
                session.send_value("granted", grant(session, base))
            except RemoteError as error:
                session.send({"op": "granted", "refused": str(error)})


def owner(results):
    cuda = torch.cuda.is_available()
    if cuda:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
        torch.empty(1, device="cuda")  # torch's CUDA in use, as in ComfyUI: its device is probed
    else:
        print("WARN cuda-replica: no CUDA in this torch: the revocation protocol ran with the grant's tensors staged; "
              "the IPC mapping and the device memory an unload frees are checked by scripts/gpu-check on a GPU")
    torch.manual_seed(0)
    base = comfy.model_base.model_from_config(CONFIG)
    base.diffusion_model.to(device())
    unet = base.diffusion_model
    expected = forward(unet)
    weights = sum(t.numel() * t.element_size() for t in unet.state_dict().values())

    host_end, worker_end = socket.socketpair()
    host_arena, host_read_only = sealed_arena()
    worker_arena, worker_read_only = sealed_arena()
    fds = [worker_end.fileno(), worker_arena, host_read_only]
    reader = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--reader", *map(str, fds)], pass_fds=fds)
    worker_end.close()
    os.close(worker_arena), os.close(host_read_only)
    session = Session(host_end, PeerArena(worker_read_only), OwnArena(host_arena, ARENA_BYTES), 1, "pack reader 1",
                      copy_received=False)
    try:
        # grant
        session.send_value("grant", grant(session, base))
        answer = session.next_op("forward")
        out = session.decoder(resolve=None).decode(answer["value"])
        results.check(torch.equal(out, expected), f"grant: the reader's forward over the granted weights is bit-equal "
                                                  f"to the owner's ({answer['how']})")
        if cuda:
            results.check(answer["mapped"], "grant: the reader's weights lie over the host's memory (CUDA IPC, no copy)")

        # unload: the reader is busy elsewhere (not reading its socket) meanwhile
        session.send({"op": "busy"})
        session.next_op("busy")
        before = torch.cuda.memory_allocated() if cuda else 0
        with mirror.unloading(base):
            refused = None
            try:
                grant(session, base)
            except RemoteError as error:
                refused = str(error)
            unet.to("cpu")  # upstream's unload, as far as the weights go
        after = torch.cuda.memory_allocated() if cuda else 0
        results.check(refused is not None and "\n" not in refused,
                      f"unload: no grant of the module is made while it runs: {refused}")
        results.check(not session.closed.is_set(), "unload: the reader let go in time, and its session goes on")
        if cuda:
            results.check(before - after >= weights, f"unload: the host's allocated CUDA memory is down by "
                                                     f"{before - after} bytes, the weights' {weights}")
        session.send({"op": "resume"})
        state = session.next_op("state")
        results.check(state["dropped"] and state["meta"] and state["let_go"],
                      f"unload: the reader's watch dropped its kept mirror while it was busy: {state}")

        # again: the owner loads again; the reader's next use maps it in place
        unet.to(device())
        stop = threading.Event()
        server = threading.Thread(target=serve_grants, args=(session, base, stop))
        server.start()
        try:
            session.send({"op": "again"})
            answer = session.next_op("forward")
            out = session.decoder(resolve=None).decode(answer["value"])
            results.check(torch.equal(out, expected) and answer["maps"] == 1,
                          f"again: the kept mirror was mapped again in place at its next use, bit-equal "
                          f"(mapped again {answer['maps']} time)")

            # cut: the reader's forward stops in a block until its watch fired
            session.send({"op": "cut"})
            session.next_op("in_forward")
            revoked = mirror.revoke(base)
            answer = session.next_op("cut")
        finally:
            stop.set()
            server.join()
        results.check(revoked == 1 and not session.closed.is_set(),
                      "cut: the owner's wait ended once the forward stopped, and the session goes on")
        results.check(answer["error"] is not None and "\n" not in answer["error"] and "revoked" in answer["error"],
                      f"cut: the forward a revocation cut through raised one line: {answer['error']}")

        # kept: a reader that keeps its watch past the revocation
        session.send_value("keep", grant(session, base))
        session.next_op("keeping")
        cuda_mirror.REVOKE_WAIT_S = 1.0  # the bound is what ends it: no reader lets go here
        lines = []
        handler = logging.Handler()
        handler.emit = lambda record: lines.append(record.getMessage())
        logging.getLogger("comfy_supervisor").addHandler(handler)
        mirror.revoke(base)
        logging.getLogger("comfy_supervisor").removeHandler(handler)
        results.check(session.closed.is_set() and "kept a revoked CUDA mirror" in (session.protocol_error or ""),
                      f"kept: the session of a reader that kept its watch was ended ({session.protocol_error})")
        results.check(len(lines) == 1 and "pack reader 1" in lines[0],
                      f"kept: one log line names it: {lines}")
        held = [grant.held for grant in cuda_mirror._quarantined]
        results.check(len(held) == 1 and held[0], "kept: what was lent for it stays the host's while the reader's "
                                                  "process lives (it may still map it)")
        reader.wait(REPLY_WAIT_S)
        mirror.revoke(base)
        results.check(not cuda_mirror._quarantined, "kept: and the host lets go of it once that process is gone")
    finally:
        session.close()
        reader.wait(REPLY_WAIT_S)
    return results


# ---- the reader: the second process ----

def reader_main(sock_fd, own_fd, peer_fd):
    crossing.install()
    if torch.cuda.is_available():
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
        torch.empty(1, device="cuda")
    session = Session(socket.socket(fileno=sock_fd), PeerArena(peer_fd), OwnArena(own_fd, ARENA_BYTES), 1,
                      "host 1", copy_received=False)
    watches = (session.mirrors.watches, session.cuda)

    def claimed(message):
        description = session.decoder(resolve=None).decode(message["value"])
        return description, session.mirrors.fds.pop(description["key"])

    def renew():
        session.send({"op": "renew"})
        answer = session.next_op("granted")
        if "refused" in answer:
            raise RemoteError(answer["refused"])
        return claimed(answer)

    description, fd = claimed(session.next_op("grant"))
    kept = mirror.Mirror(description, fd, WHAT, renew=renew, watches=watches)
    os.close(fd)
    del description
    mapped = bool(kept.watch.lends)
    session.send_value("forward", forward(kept.module), how="by CUDA IPC" if mapped else "staged", mapped=mapped)

    session.next_op("busy")
    session.send({"op": "busy"})
    busy_until(lambda: kept.dropped is not None)  # busy elsewhere: the socket is not read meanwhile
    session.next_op("resume")
    session.send({"op": "state", "dropped": kept.dropped is not None, "let_go": kept.watch is None,
                  "meta": all(p.device.type == "meta" for p in kept.module.parameters())})

    session.next_op("again")
    session.send_value("forward", forward(kept.module), maps=kept.maps)

    session.next_op("cut")
    watch = kept.watch

    def stop_in_block(module, args):
        hook.remove()
        session.send({"op": "in_forward"})
        busy_until(lambda: watch.revoked)  # the block computes until the revocation came

    hook = kept.module.block.register_forward_pre_hook(stop_in_block)
    try:
        forward(kept.module)
        error = None
    except RemoteError as raised:
        error = str(raised)
    session.send({"op": "cut", "error": error})

    keep = session.next_op("keep")
    description, fd = claimed(keep)
    held = mirror.Mirror(description, fd, WHAT, watches=watches)
    kept_end = os.dup(fd)  # what the owner's watch ends at stays open here
    os.close(fd)
    session.send({"op": "keeping"})
    while session.read_some():
        pass  # until the owner ends the session
    os.close(kept_end)
    del held
    session.close()


def busy_until(condition):
    """Work of the reader's own that reads no socket, until `condition()`."""
    deadline = time.monotonic() + REPLY_WAIT_S
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


def main():
    if sys.argv[1:2] == ["--reader"]:
        reader_main(*map(int, sys.argv[2:5]))
        return 0
    crossing.install()
    results = CheckReport("cuda-replica")
    print(f"cuda-replica: torch {torch.__version__}, " +
          (f"CUDA device 0: {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else "no CUDA"))
    owner(results)
    return results.finish()


if __name__ == "__main__":
    sys.exit(main())
