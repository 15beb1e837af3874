"""One host life and one pack life, joined by the call socket the supervisor made for them.

Both sides keep the same books for a session: the blocks of their own arena they lent
the peer, counted once per naming (freed when the peer let go of every naming, or all at
once when the session ends; the host keeps one for the tensor it holds, to name it again:
lent_blocks.py), and
the releases they owe the peer for its blocks, handles and node instances they let go of.
The host's PackSession and the worker's HostSession add what each side does with a call.

The host copies what it receives (copy_received): a worker's blocks and CUDA tensors
alike, since the worker can still write them once its node returned, and ComfyUI caches
node outputs. A tensor the worker returns as it came is the host's own tensor again (the
one the host wrote the block from, as in one process a node returns its input itself),
or a copy of the block where that tensor is gone: the worker can write the arena the host
lent it too.

Who reads the call socket: whoever holds read_lock. The thread that waits for a call's
reply (the host) or for the next call (the worker) reads it itself: no thread handoff
on either side of a call, which is most of a call's cost in Python. Between calls the
host drains what came (drain_available, every command-thread period); the worker reads
the releases that came during a node at its end, and hears interrupts through the host
arena's interrupt word (pack_worker/node_server.py).

Besides calls and their replies, a session carries messages of its own, whoever reads
them: releases, the CUDA IPC handshake (cuda_ipc.py), which each side begins as the
session opens, and the uses of remote objects and their answers (conversation.py), which
the thread that reads serves or hands to the thread that waits for them. The reading lock
is reentrant: a thread that waits for a node's reply and serves the pack's use of a host
object meanwhile reads again for the answer of its own use of the pack's, and so on.
"""

import threading
import time

from .channel import Channel, ProtocolError, ReleaseQueue
from .cuda_ipc import CudaExchange
from .lent_blocks import LentBlocks
from .mirror import Grants, Mirrors
from .values import Decoder, Encoder, ValueCrossingError

SESSION_OPS = ("release", "cuda_hello", "cuda_accepts", "invoke", "invoked", "mirror_fd")
# How long a CUDA tensor waits for the peer's answer to our CUDA probe before it is staged
# through the arena instead; the answer comes within milliseconds of a session's start.
CUDA_ANSWER_WAIT_S = 2.0
_READ_SLICE_S = 0.05


class PeerSession:
    """`peer`: the arena the peer writes for us, as we read it (arena.PeerArena in place, or
    arena.CopiedArena); `own`: the arena we write for the peer (arena.OwnArena);
    `copy_received`: we keep nothing the peer can still write (the host); `watch`: the
    participant library's watch of the peer's frames word (channel.Channel.count_frames)."""

    def __init__(self, sock, peer, own, generation, name, copy_received, watch=None):
        self.name = name              # for thread names and messages
        self.generation = generation  # the peer's life
        self.channel = Channel(sock)
        self.channel.count_frames(own.frames, peer.frames, peer.frames_address, watch)
        self.peer = peer
        self.own = own
        self.copy_received = copy_received
        # Our blocks the peer holds, and (the host) those kept for the tensors they hold.
        self.blocks = LentBlocks(own, keep=copy_received)
        self.close_lock = threading.Lock()
        self.releases = ReleaseQueue(self.channel, name)
        self.closed = threading.Event()
        self.protocol_error = None
        # The host ended the peer's life for outrunning ComfyUI's Cancel: what waited on it
        # was interrupted (conversation.py, host/proxy_nodes.py).
        self.ended_at_cancel = False
        self.read_lock = threading.RLock()
        self.owed = []                # releases that came on frames read, applied once each frame is handled
        self.remote = None            # this side's Conversation, set by the side's session
        self.cuda = CudaExchange(self.channel.send, lambda lend: self.releases.push("cuda", lend),
                                 self.await_cuda_answer, copy_received)
        self.grants = Grants(self.channel, self.cuda, self)           # the mirrors of ours the peer was granted
        self.mirrors = Mirrors(self.channel, self.cuda, self.name)  # our mirrors of the peer's modules
        self.cuda.hello()

    # ---- values ----

    def encoder(self, handle_of=None):
        """Remote objects as the conversation tags them; any other object as `handle_of`
        (default: the side's object_handle) makes it."""
        handle_of = handle_of or self.object_handle

        def tag(value):
            return self.remote.tag_of(value) or handle_of(value)

        # A side that copies what it receives holds nothing in the peer's blocks to send back.
        return Encoder(self.own, tag, peer=None if self.copy_received else self.peer, cuda=self.cuda,
                       blocks=self.blocks)

    def encode(self, value):
        """`value` encoded, and its encoder, whose lends the caller passes to lend() once the
        message is on its way; on a value that cannot cross, nothing stays lent."""
        encoder = self.encoder()
        try:
            return encoder.encode(value), encoder
        except BaseException:
            self.take_back(encoder)
            raise

    @property
    def lent(self):
        """Our blocks the peer holds (for counts and checks)."""
        return self.blocks.namings.keys()

    def lend(self, encoder):
        """The blocks and CUDA tensors `encoder` lent are the peer's to release from now on,
        once for each naming (a block named again was counted as the encoder named it)."""
        if (encoder.lent or encoder.named_again) and not self.blocks.lend(encoder.lent, encoder.sources):
            self.take_back(encoder)

    def take_back(self, encoder):
        """What `encoder` lent never reached the peer (the message was not sent)."""
        self.blocks.take_back(encoder.lent, encoder.named_again)
        self.cuda.let_go(encoder.cuda_lent)

    def decoder(self, resolve=None):
        """Remote objects as the conversation resolves them; handles as `resolve`
        (default: the side's object_from_handle) does."""
        resolve = resolve or self.object_from_handle

        def value_of(tag):
            return self.remote.resolve(tag) if tag.get("$") in ("remote", "own") else resolve(tag)

        return Decoder(self.peer, lambda offset: self.releases.push("blocks", offset), value_of,
                       self.own_block if self.copy_received else None, self.cuda)

    def own_block(self, block, at, nbytes, dtype, shape, copies):
        """The tensor for `nbytes` at `at` of our block `block`, lent to the peer, which sent
        that part of it back as it came: over the tensor we wrote the block from, where it
        lives and its bytes are the block's; else over a copy of the block, which the peer
        can write, made once per message (`copies`: block -> the copy), so that a message
        copies at most the blocks it names, not each time it names one. The caller still
        holds the reading lock, so the peer's release of the block, sent after this, is
        not read before the copy is made."""
        size = self.own.size_of(block) if self.blocks.holds(block) else None
        if size is None or at < 0 or nbytes < 0 or at + nbytes > size:
            raise ValueCrossingError(f"a tensor sent back in a block of ours it does not hold "
                                     f"({nbytes} bytes at {at} of block {block})")
        import torch
        tensor = self.blocks.source_of(block)
        if tensor is not None:
            if at == 0 and tensor.dtype == dtype and list(tensor.shape) == shape and not tensor.requires_grad:
                return tensor  # the whole tensor, as it went: itself, as in one process
            try:
                return tensor.detach().reshape(-1).view(torch.uint8)[at:at + nbytes].view(dtype).view(shape)
            except RuntimeError:
                pass  # a part whose place or dtype no view of the tensor can take
        copy = copies.get(block)
        if copy is None:
            copy = copies[block] = torch.from_numpy(self.own.copy(block, size))
        part = copy[at:at + nbytes]
        try:
            return part.view(dtype).view(shape)
        except RuntimeError:
            return part.clone().view(dtype).view(shape)  # a place no view of the dtype can take

    # ---- sending ----

    def send(self, message):
        """Sends `message` with what this side let go of since its last frame riding on it
        (channel.ReleaseQueue says why); False when the peer is gone."""
        released = self.releases.take()
        if released:
            message["released"] = released
        return self.channel.send(message)

    def call_done(self):
        """A node call's end, on either side: the releases that came with its frames are
        applied, and what this side let go of in it is sent now rather than with the next
        frame. Calls are far apart next to a sampler's uses, and a block the peer gets back
        at once is the one it writes the next call's value into, its pages in memory
        already (measured: a 16 MiB tensor's round trip 15-20% slower with its block
        released only with the next call)."""
        self.settle()
        released = self.releases.take()
        if released:
            self.channel.send({"op": "release", **released})

    # ---- reading ----

    def next_message(self, timeout_s, spin_s=0.0):
        """The next message, read by the caller, who holds read_lock: False when none came
        within `timeout_s` (None: wait for ever), None when the session ended. `spin_s`:
        as Channel.receive. The releases a frame carries are applied once the frame is
        handled (settle()): at the latest as the next one is read."""
        self.settle()
        if self.closed.is_set():
            return None
        try:
            message = self.channel.receive(timeout_s, spin_s)
        except ProtocolError as error:
            self.protocol_error = str(error)
            message = None
        if message is None:
            self.close()
        elif message and "released" in message:
            self.owed.append(message.pop("released"))
        return message

    def settle(self):
        """Applies the releases that came on the frames read so far, by the reader, once
        it handled them: as if each frame's releases had come right after it. A frame
        never sends back a block its own releases let go of (the sender held the tensor
        over it when it wrote the frame), and a block the peer let go of is not ours to
        lend again before that is read."""
        while self.owed:
            released = self.owed.pop(0)
            if isinstance(released, dict):
                self._released(released)

    def dispatch(self, message):
        op = message.get("op")
        if op == "release":
            self._released(message)
        elif op == "cuda_hello":
            self.cuda.on_hello(message)
        elif op == "cuda_accepts":
            self.cuda.on_accepts(message)
        elif op == "invoke":
            self.remote.on_invoke(message)
        elif op == "invoked":
            self.remote.on_invoked(message)
        elif op == "mirror_fd":
            self.mirrors.on_fd(message)
        else:
            self.on_message(message)
        self.settle()

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
        if isinstance(blocks, list):
            self.blocks.released(blocks)
        self.cuda.let_go(cuda if isinstance(cuda, list) else ())
        self.remote.on_release(message.get("objects"))
        self.on_release(message)

    def close(self):
        """Ends the session: what the peer held of ours is ours again."""
        with self.close_lock:
            if self.closed.is_set():
                return
            self.closed.set()
        self.blocks.close()
        self.mirrors.close(f"{self.ended()}")
        self.grants.close()  # the copies made for the peer are punched out, whatever it kept
        self.cuda.close()
        self.remote.close()
        self.releases.close()
        self.channel.close()
        self.on_close()

    def broke(self, why):
        """The peer broke the session's rules outside a frame (it kept a revoked CUDA mirror's
        memory, bridge/cuda_mirror.py): the session ends as at a protocol error, which the
        host answers by asking the supervisor to end that worker's life."""
        self.protocol_error = why
        self.close()

    # ---- for the two sides ----

    def on_message(self, message):
        raise NotImplementedError

    def object_handle(self, value):
        """The tag of an object that is neither plain nor remote (or ValueCrossingError)."""
        raise NotImplementedError

    def object_from_handle(self, tag):
        """The object a handle tag stands for here (or ValueCrossingError)."""
        raise NotImplementedError

    def ended(self):
        """Why the peer's objects are gone, and what to do, for a proxy used after the session."""
        raise NotImplementedError

    def on_release(self, message):
        """The peer let go of handles or node instances of ours."""

    def on_close(self):
        """The session ended (the peer's life, or ours, or a protocol error)."""
