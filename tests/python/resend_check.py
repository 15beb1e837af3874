"""A tensor sent again is shared once (bridge/lent_blocks.py, arena.PeerArena, issue 37):
the host's side and a worker's of one session, over real arenas (memfds, the worker's
mapped privately as a pack's worker maps it), in one process. The messages are encoded and
decoded by the sessions' own Encoder and Decoder; the worker's releases reach the host as
a release message does.

    resend_check.py
"""

import gc
import os
import socket
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "host"))
sys.path.insert(0, os.path.join(ROOT, "worker", "python"))

from check_report import CheckReport  # noqa: E402

import torch  # noqa: E402
from comfy_supervisor import crossing  # noqa: E402
from comfy_supervisor.bridge import arena, conversation, session, values  # noqa: E402

MIB = 1 << 20


class Side(session.PeerSession):
    """One side of a session: the host's (copy_received) or a worker's."""

    def __init__(self, peer, own, copy_received):
        near, far = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        threading.Thread(target=self.drain, args=(far,), daemon=True).start()
        super().__init__(near, peer, own, 1, "host" if copy_received else "worker", copy_received)
        self.remote = conversation.Conversation(self, self.name, enforce=copy_received)

    @staticmethod
    def drain(far):  # what a side sends (its CUDA probe, releases) is dropped: this check delivers them
        while far.recv(1 << 16):
            pass
        far.close()

    def on_message(self, message):
        pass

    def ended(self):
        return f"{self.name} ended"


class Pair:
    """The host and a worker, with the host's arena of `nbytes` (its control page and blocks)."""

    def __init__(self, nbytes=64 * MIB):
        host_fd, worker_fd = os.memfd_create("resend-host-arena"), os.memfd_create("resend-worker-arena")
        os.ftruncate(host_fd, nbytes)
        os.ftruncate(worker_fd, 8 * MIB)
        self.host = Side(arena.CopiedArena(os.dup(worker_fd)), arena.OwnArena(os.dup(host_fd)), True)
        self.worker = Side(arena.PeerArena(os.open(f"/proc/self/fd/{host_fd}", os.O_RDONLY)),
                           arena.OwnArena(worker_fd), False)
        os.close(host_fd)
        self.released = []  # the worker's releases not delivered yet

    def send(self, value):
        """The host sends `value`: (what the worker decoded, the host's encoder)."""
        encoded, encoder = self.host.encode(value)
        self.host.lend(encoder)
        self.last = encoded
        return values.Decoder(self.worker.peer, self.released.append, None).decode(encoded), encoder

    def deliver(self, count=None):
        """The worker's releases so far (the first `count` of them) reach the host."""
        gc.collect()
        count = len(self.released) if count is None else count
        delivered = self.released[:count]
        del self.released[:count]  # the list the decoders append to
        self.host.dispatch({"op": "release", "blocks": delivered})
        return delivered

    def echo(self, tensor):
        """The worker sends `tensor` back as it came: (its encoding, what the host decoded)."""
        encoded, encoder = self.worker.encode(tensor)
        self.worker.lend(encoder)
        return encoded, self.host.decoder(lambda tag: None).decode(encoded)

    def close(self):
        self.host.close()
        self.worker.close()
        self.host.peer.close()


def sent_twice(report):
    pair = Pair()
    image = torch.rand(1, 256, 256, 4)  # 1 MiB
    (seen,), first = pair.send([image])
    offset, used = pair.last[0]["offset"], pair.host.own.used
    report.check(first.lent == [offset] and torch.equal(seen, image), "a tensor sent once is written into a block")
    del seen
    pair.deliver()
    report.check(offset not in pair.host.lent and offset in pair.host.blocks.cached and pair.host.own.used == used,
                 "released by the worker, its block is kept for the tensor, not freed")
    (seen,), again = pair.send([image])
    report.check(pair.last[0]["offset"] == offset and again.lent == [] and again.named_again == [offset] and
                 pair.host.own.used == used,
                 f"the same tensor, unchanged, sent again names the same block: no write, no new block "
                 f"({pair.last[0]}, written {again.lent})")
    report.check(torch.equal(seen, image), "and the worker reads the tensor's bytes in it")
    back, returned = pair.echo(seen)
    report.check("yours" in back and back["yours"] == offset and returned is image,
                 f"the worker's echo of it goes back as a description, and is the host's tensor again ({back})")
    del seen, returned
    pair.deliver()
    image.add_(1)  # an in-place write between sends
    (seen,), third = pair.send([image])
    report.check(third.lent == [pair.last[0]["offset"]] and third.named_again == [] and torch.equal(seen, image),
                 "a tensor written in place since is written again, and the worker reads its new values")
    del seen
    pair.deliver()
    inference = None
    with torch.inference_mode():
        inference = torch.rand(1, 256, 256, 4)
    pair.send([inference])
    pair.deliver()
    _, inferred = pair.send([inference])
    report.check(inferred.lent and not inferred.named_again,
                 "an inference tensor (torch counts no writes of it) is written each time it is sent")
    pair.deliver()
    kept, used = len(pair.host.blocks.cached), pair.host.own.used
    del image, first, again, third  # the encoders hold what they encoded
    gc.collect()
    report.check(len(pair.host.blocks.cached) == kept - 1 and pair.host.own.used == used - MIB,
                 "a kept block is freed when its tensor is collected")
    pair.close()
    report.check(pair.host.own.used == 0 and not pair.host.blocks.cached, "and every kept block at the session's end")


def worker_wrote(report):
    pair = Pair()
    image = torch.rand(1, 256, 256, 4)
    (written,), _ = pair.send([image])
    written.fill_(-1.0)  # the node writes into its input: its own copy of the pages
    (seen,), again = pair.send([image])
    report.check(again.named_again == [pair.last[0]["offset"]] and torch.equal(seen, image) and
                 bool((written == -1).all()) and bool((image >= 0).all()),
                 "a worker that wrote into its tensor gets the same host tensor again: it reads the host's bytes, "
                 "its earlier tensor keeps its own writes, the host's is untouched")
    back, returned = pair.echo(seen)
    report.check(back.get("yours") == pair.last[0]["offset"] and returned is image,
                 f"that second tensor's echo is a description both ways too ({sorted(back)})")
    seen.fill_(-2.0)
    del written
    gc.collect()
    report.check(bool((seen == -2).all()), "the earlier tensor's release drops none of the second one's writes")
    del seen, returned
    pair.deliver()
    (seen,), _ = pair.send([image])
    report.check(torch.equal(seen, image), "once both are let go of, the block reads the host's bytes when named again")
    (twice,), _ = pair.send([image])
    report.check(torch.equal(twice, image) and twice.data_ptr() == seen.data_ptr(),
                 "a block named again while an unwritten view of it is held is read over the same pages")
    del seen, twice
    pair.close()


def counted_releases(report):
    pair = Pair()
    image = torch.rand(1, 256, 256, 4)
    (first,), _ = pair.send([image])
    offset = pair.last[0]["offset"]
    del first
    gc.collect()  # the worker let go of the first naming; its release is in flight
    (second,), again = pair.send([image])
    report.check(again.named_again == [offset], "the tensor is named again while the first release is in flight")
    pair.deliver(1)
    report.check(offset in pair.host.lent and offset not in pair.host.blocks.cached,
                 "the release of the first naming leaves the block the worker's: one release per naming")
    other = pair.host.blocks.allocate(MIB)
    report.check(other != offset, "and the host never writes it meanwhile: a new block is another")
    pair.host.own.free(other)
    report.check(torch.equal(second, image), "the worker's second tensor reads the host's bytes")
    del second
    pair.deliver()
    report.check(offset not in pair.host.lent and offset in pair.host.blocks.cached,
                 "the release of the second naming lets it go")
    pair.close()


def evicted_before_full(report):
    pair = Pair(arena.CONTROL_BYTES + 2 * MIB)
    first, second = torch.rand(1, 256, 256, 4), torch.rand(1, 256, 256, 4)  # 1 MiB each
    third = torch.rand(1, 256, 256, 4)
    pair.send([first])
    pair.send([second])
    pair.deliver()
    report.check(len(pair.host.blocks.cached) == 2, "two tensors sent and released fill the arena with kept blocks")
    (seen,), encoder = pair.send([third])
    report.check(encoder.lent and torch.equal(seen, third) and len(pair.host.blocks.cached) == 1,
                 "a third tensor's write evicts the least recently named kept block instead of the arena being full")
    (again,), encoder = pair.send([second])
    report.check(encoder.named_again and torch.equal(again, second), "the other kept block is still named again")
    try:
        pair.send([first])
        full = None
    except arena.ArenaFull as error:
        full = str(error)
    report.check(full is not None and "\n" not in full,
                 f"with every block held by the worker, the arena is full, in one line ({full})")
    del seen, again
    pair.close()


def main():
    report = CheckReport("resend")
    crossing.install()  # what crosses, and how, as the host's and a worker's start give it
    sent_twice(report)
    worker_wrote(report)
    counted_releases(report)
    evicted_before_full(report)
    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
