"""One host life and one pack life, joined by the call socket the supervisor made for them.

Both sides keep the same books for a session: the blocks of their own arena they lent
the peer (freed when the peer says it let go, or all at once when the session ends), and
the releases they owe the peer for its blocks, handles and node instances they let go of.
The host's PackSession and the worker's HostSession add what each side does with a call.

Who reads the call socket: whoever holds read_lock. The thread that waits for a call's
reply (the host) or for the next call (the worker) reads it itself: no thread handoff
on either side of a call, which is most of a call's cost in Python. Between calls the
host drains what came (drain_available, every command-thread period); the worker reads
the releases that came during a node at its end, and hears interrupts through the host
arena's interrupt word (pack_worker/node_server.py).

Besides calls and their replies, a session carries messages of its own, whoever reads
them: releases, and the CUDA IPC handshake (cuda_ipc.py), which each side begins as the
session opens.
"""

import threading
import time

from .arena import PeerArena
from .channel import Channel, ProtocolError, ReleaseQueue
from .cuda_ipc import CudaExchange
from .values import Decoder, Encoder, ValueCrossingError

SESSION_OPS = ("release", "cuda_hello", "cuda_accepts")
# How long a CUDA tensor waits for the peer's answer to our CUDA probe before it is staged
# through the arena instead; the answer comes within milliseconds of a session's start.
CUDA_ANSWER_WAIT_S = 2.0
_READ_SLICE_S = 0.05


class PeerSession:
    def __init__(self, sock, peer_arena_fd, own_arena, generation, name, copy_cuda_received):
        self.name = name              # for thread names and messages
        self.generation = generation  # the peer's life
        self.channel = Channel(sock)
        self.peer = PeerArena(peer_arena_fd)
        self.own = own_arena
        self.lent = set()             # offsets of our blocks the peer holds
        self.lent_lock = threading.Lock()
        self.releases = ReleaseQueue(self.channel, name)
        self.closed = threading.Event()
        self.protocol_error = None
        self.read_lock = threading.Lock()
        self.cuda = CudaExchange(self.channel.send, lambda lend: self.releases.push("cuda", lend),
                                 self.await_cuda_answer, copy_cuda_received)
        self.cuda.hello()

    # ---- values ----

    def encoder(self, handle_of):
        return Encoder(self.own, handle_of, peer=self.peer, cuda=self.cuda)

    def lend(self, encoder):
        """The blocks and CUDA tensors `encoder` lent are the peer's to release from now on."""
        with self.lent_lock:
            if self.closed.is_set():
                self.take_back(encoder)
            elif encoder.lent:
                self.lent.update(encoder.lent)

    def take_back(self, encoder):
        """What `encoder` lent never reached the peer (the message was not sent)."""
        for offset in encoder.lent:
            self.own.free(offset)
        self.cuda.let_go(encoder.cuda_lent)

    def decoder(self, resolve):
        return Decoder(self.peer, lambda offset: self.releases.push("blocks", offset), resolve, self.own_block,
                       self.cuda)

    def own_block(self, block, at, nbytes):
        """A view of our block `block`, lent to the peer, which sent part of it back."""
        with self.lent_lock:
            lent = block in self.lent
        size = self.own.size_of(block) if lent else None
        if size is None or at < 0 or nbytes < 0 or at + nbytes > size:
            raise ValueCrossingError(f"a tensor sent back in a block of ours it does not hold "
                                     f"({nbytes} bytes at {at} of block {block})")
        return self.own.held_view(block, at, nbytes)

    # ---- reading ----

    def next_message(self, timeout_s, spin_s=0.0):
        """The next message, read by the caller, who holds read_lock: False when none came
        within `timeout_s` (None: wait for ever), None when the session ended. `spin_s`:
        as Channel.receive."""
        if self.closed.is_set():
            return None
        try:
            message = self.channel.receive(timeout_s, spin_s)
        except ProtocolError as error:
            self.protocol_error = str(error)
            message = None
        if message is None:
            self.close()
        return message

    def dispatch(self, message):
        op = message.get("op")
        if op == "release":
            self._released(message)
        elif op == "cuda_hello":
            self.cuda.on_hello(message)
        elif op == "cuda_accepts":
            self.cuda.on_accepts(message)
        else:
            self.on_message(message)

    def drain_available(self):
        """Dispatches whatever came, without waiting, unless someone else is reading."""
        if not self.read_lock.acquire(blocking=False):
            return
        try:
            while True:
                message = self.next_message(0)
                if not message:
                    return
                self.dispatch(message)
        finally:
            self.read_lock.release()

    def await_cuda_answer(self):
        """Reads, for up to CUDA_ANSWER_WAIT_S, until the peer answered our CUDA probe:
        the first CUDA tensor of a session may come before its answer was read."""
        deadline = time.monotonic() + CUDA_ANSWER_WAIT_S
        while not self.cuda.answered.is_set() and not self.closed.is_set():
            left = min(deadline - time.monotonic(), _READ_SLICE_S)
            if left <= 0:
                return
            if not self.read_lock.acquire(timeout=left):
                continue  # another thread reads, and dispatches the answer if it comes
            try:
                message = self.next_message(left)
                if message:
                    self.dispatch(message)
            finally:
                self.read_lock.release()

    def _released(self, message):
        blocks, cuda = message.get("blocks"), message.get("cuda")
        with self.lent_lock:
            for offset in blocks if isinstance(blocks, list) else ():
                if type(offset) is int and offset in self.lent:  # never another session's block
                    self.lent.discard(offset)
                    self.own.free(offset)
        self.cuda.let_go(cuda if isinstance(cuda, list) else ())
        self.on_release(message)

    def close(self):
        """Ends the session: what the peer held of ours is ours again."""
        with self.lent_lock:
            if self.closed.is_set():
                return
            self.closed.set()
            for offset in self.lent:
                self.own.free(offset)
            self.lent.clear()
        self.cuda.close()
        self.releases.close()
        self.channel.close()
        self.on_close()

    # ---- for the two sides ----

    def on_message(self, message):
        raise NotImplementedError

    def on_release(self, message):
        """The peer let go of handles or node instances of ours."""

    def on_close(self):
        """The session ended (the peer's life, or ours, or a protocol error)."""
