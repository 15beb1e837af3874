"""The two sockets of node calls, as the supervisor hands them out (docs/PACKS.md).

- The bridge control socket (COMFY_SV_BRIDGE_FD, a SOCK_SEQPACKET end made for this life):
  the supervisor's datagrams, each one JSON object, some with descriptors attached: which
  peers exist, a fresh call socket to each with the arenas of the pairing (the pack's,
  read-only to the host; the host's for that pack, writable to the host and read-only to
  the pack), and which peers exited or failed. Only the supervisor writes it.
- A call socket (SOCK_STREAM), one per host life and pack life: frames of a 4-byte
  little-endian length and one UTF-8 JSON object, both ways. A frame may carry descriptors
  with its first bytes (SCM_RIGHTS: a mirror's memfd, bridge/mirror.py), held in order
  until the frame that says it came with one claims it, at most MAX_HELD_FDS at a time.

Everything received is input, not truth: a frame over MAX_FRAME_BYTES, a frame that is
not a JSON object, and a control datagram with the wrong descriptors raise ProtocolError
with one line.
"""

import contextlib
import json
import os
import select
import socket
import struct
import threading
import time

MAX_FRAME_BYTES = 64 << 20     # a call's plain values; tensors travel in the arenas
MAX_CONTROL_BYTES = 64 << 10
MAX_HELD_FDS = 16              # descriptors a peer sent that no frame claimed yet (bridge/mirror.py's)
_LENGTH = struct.Struct("<I")
_RECEIVE_BYTES = 64 << 10
# How long a reader watches the peer's frames word before it sleeps on the socket
# (Channel.receive). On the virtual machines this runs on, a reader that slept is woken
# through the kernel, its vCPU perhaps halted: measured on 2 vCPUs, an echo of a 16-byte
# tensor took 340-1070 us p50 when its reply outlasted a 100 us watch, and 120-170 us
# with this one (docs/BENCHMARKS.md, "How the bridge waits").
SPIN_S = 1e-3
# A reader spins only while spinning pays (Channel.receive): while at least this share of
# its recent spins caught the message (a moving average over about 8 spins), and else one
# receive in SPIN_PROBE_EVERY, to see whether the machine has a CPU free again.
SPIN_PAYS = 0.5
SPIN_PROBE_EVERY = 32
# What a side let go of rides on its next frame; with no frame going out, the releases
# thread sends it this long after the first of it (ReleaseQueue).
RELEASE_AFTER_S = 0.01
# One encoder and decoder for every frame: json.dumps with arguments builds a new one
# each call, a good part of a small frame's cost.
_encode = json.JSONEncoder(separators=(",", ":")).encode
_decode = json.JSONDecoder().decode


class ProtocolError(RuntimeError):
    """A peer broke the protocol; the message is one line."""


class Channel:
    """One call socket. send() is safe from any thread; receive() is for one reader at a
    time (PeerSession.read_lock)."""

    def __init__(self, sock):
        self.sock = sock
        self.fd = sock.fileno()
        self.send_lock = threading.Lock()
        self.buffer = bytearray()  # received, not parsed yet
        self.end = False           # None once the peer closed its end
        self.timeout_s = None      # the socket's, as last set
        self.last_frame_bytes = 0  # the length of the frame receive() returned last: what it cost to carry
        self.poller = select.poll()  # receive()'s one look before it watches the peer's frames word
        self.poller.register(sock, select.POLLIN)
        self.own_frames = None     # our arena's frames word, counted after each frame sent (arena.py)
        self.peer_frames = None    # the peer's, which receive() watches before it sleeps (count_frames)
        self.peer_address = None
        self.watch = None
        self.fds = []              # descriptors received with the frames, oldest first, not taken yet
        self.fds_lock = threading.Lock()
        # A process that may run on one CPU only never spins: its peer could not answer
        # on another meanwhile (measured: every probe's whole watch lost, docs/BENCHMARKS.md).
        self.may_spin = len(os.sched_getaffinity(0)) > 1
        self.spin_caught = 1.0     # moving average: how many of the recent spins caught the message
        self.unspun = 0            # receives without a spin since the last one

    def count_frames(self, own, peer, peer_address=None, watch=None):
        """The frames words (arena.py) this channel counts its frames sent in (`own`) and
        watches the peer's in (`peer`, at `peer_address`); either may be None. Without the
        peer's, or without `watch(address, seen, spin_s)`, the participant library's watch,
        receive() does not spin: the library lets go of the GIL while it watches, so that
        the process's other threads (the host's calls to other packs) run meanwhile, where
        a loop here would hold it."""
        self.own_frames, self.peer_frames = own, peer
        self.watch = watch if peer_address is not None else None
        self.peer_address = peer_address

    def send(self, message, fds=()):
        """False when the peer is gone (its end closed). Written with os.write, whatever
        timeout the reader set on the socket (a timeout makes the descriptor non-blocking
        for every user of it): a full socket buffer is waited out here. `fds`: descriptors
        that go with the frame's first bytes (SCM_RIGHTS), for the peer's take_fd()."""
        data = _encode(message).encode()
        frame = memoryview(_LENGTH.pack(len(data)) + data)
        with self.send_lock:
            while fds:
                try:
                    frame, fds = frame[socket.send_fds(self.sock, [frame], list(fds)):], ()
                except (BlockingIOError, socket.timeout):
                    select.select([], [self.fd], [])
                except OSError:
                    return False
            while frame:
                try:
                    frame = frame[os.write(self.fd, frame):]
                except BlockingIOError:
                    select.select([], [self.fd], [])
                except OSError:
                    return False
            if self.own_frames is not None:  # after the frame is whole in the socket: a reader that sees it reads it
                self.own_frames[0] = (self.own_frames[0] + 1) & 0xFFFFFFFF
        return True

    def has_frame(self):
        """A whole frame is buffered already: receive() returns it without reading."""
        if len(self.buffer) < _LENGTH.size:
            return False
        return len(self.buffer) >= _LENGTH.size + _LENGTH.unpack_from(self.buffer)[0]

    def receive(self, timeout_s=None, spin_s=0.0):
        """The next message; False when it did not come whole within `timeout_s` (None:
        wait for ever; what came of it stays buffered for the next call); None when the
        peer closed its end. `spin_s`: first watch the peer's frames word (count_frames) that
        long for it, without sleeping. A reader asleep must be woken by the writer's kernel,
        across CPUs an interrupt that costs tens of microseconds on a virtual machine; one
        that spins just reads. As the rings do, spin briefly, then sleep; but only while
        spinning pays. On a machine
        whose CPUs are all taken, the peer waits for a CPU to answer on, and a reader that
        spins holds one of them: measured on two loaded vCPUs (load 7), an empty remote
        call took 255-290 us p50 with both sides spinning 100 us and 57-64 us with neither
        (docs/BENCHMARKS.md). So a reader whose spins mostly end without the message
        stops spinning, and tries again one receive in SPIN_PROBE_EVERY."""
        if spin_s and self.may_spin and self.watch is not None and not self.has_frame():
            self.unspun += 1
            if self.spin_caught >= SPIN_PAYS or self.unspun >= SPIN_PROBE_EVERY:
                self.unspun = 0
                self.spin_caught += ((1.0 if self._watch(spin_s) else 0.0) - self.spin_caught) / 8
        if not self._fill(_LENGTH.size, timeout_s):
            return self.end
        (length,) = _LENGTH.unpack_from(self.buffer)
        if length > MAX_FRAME_BYTES:
            raise ProtocolError(f"a frame of {length} bytes (at most {MAX_FRAME_BYTES})")
        if not self._fill(_LENGTH.size + length, timeout_s):
            return self.end
        data = self.buffer[_LENGTH.size:_LENGTH.size + length]
        del self.buffer[:_LENGTH.size + length]
        self.last_frame_bytes = length
        try:
            message = _decode(data.decode())
        except (ValueError, RecursionError) as error:
            raise ProtocolError(f"a frame that is not JSON: {error}") from None
        if not isinstance(message, dict):
            raise ProtocolError("a frame that is not a JSON object")
        return message

    def _watch(self, spin_s):
        """Whether the peer sent a frame within `spin_s`, watched on its frames word: one
        system call, for what came before we looked at the word, then the library's watch."""
        seen = self.peer_frames[0]
        if self.poller.poll(0):
            return True
        return self.watch(self.peer_address, seen, spin_s)

    def _fill(self, count, timeout_s):
        """At least `count` bytes buffered, else False (self.end says why: False for a
        timeout, None for the end of the stream). One recv usually brings a whole small
        frame, and any that follow it."""
        while len(self.buffer) < count:
            if self.end is None:
                return False
            try:
                if timeout_s != self.timeout_s:  # each change is a system call
                    self.sock.settimeout(timeout_s)
                    self.timeout_s = timeout_s
                data, fds, _, _ = socket.recv_fds(self.sock, max(_RECEIVE_BYTES, count - len(self.buffer)),
                                                  MAX_HELD_FDS)
                self._hold(fds)
            except (socket.timeout, BlockingIOError):
                self.end = False
                return False
            except OSError:
                data = b""
            if not data:
                self.end = None
                return False
            self.buffer += data
        return True

    def _hold(self, fds):
        """Descriptors that came with what was read; beyond MAX_HELD_FDS unclaimed, closed."""
        with self.fds_lock:
            for fd in fds:
                if len(self.fds) < MAX_HELD_FDS:
                    self.fds.append(fd)
                else:
                    os.close(fd)

    def take_fd(self):
        """The oldest descriptor the peer sent that no frame claimed yet, or None: a frame
        that says it came with one claims it once it is read (its descriptor came with its
        first bytes, so before the frame was whole)."""
        with self.fds_lock:
            return self.fds.pop(0) if self.fds else None

    def close(self):
        with self.fds_lock:
            for fd in self.fds:
                os.close(fd)
            self.fds = []
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def control_socket():
    """This life's bridge control socket; None when the supervisor made none."""
    fd = os.environ.get("COMFY_SV_BRIDGE_FD")
    if not fd:
        return None
    return socket.socket(fileno=int(fd))


def receive_control(sock, descriptors):
    """The supervisor's next control message and the descriptors it carried (`descriptors`:
    how many its event takes), or None when the supervisor closed its end."""
    data, fds, _, _ = socket.recv_fds(sock, MAX_CONTROL_BYTES, 4)
    if not data:
        for fd in fds:
            os.close(fd)
        return None
    try:
        message = json.loads(data)
        if not isinstance(message, dict) or not isinstance(message.get("event"), str):
            raise ValueError("not an object with an event")
        wanted = descriptors.get(message["event"], 0)
        if len(fds) != wanted:
            raise ValueError(f"{message['event']} came with {len(fds)} descriptors, not {wanted}")
    except ValueError as error:
        for fd in fds:
            os.close(fd)
        raise ProtocolError(f"a bridge control message that is malformed: {error}") from None
    return message, fds


class ReleaseQueue:
    """What this side let go of, for the peer: blocks, CUDA lends, handles, node instances
    and remote objects, by kind. Finalizers push (any thread, at any time). The frames this
    side sends take what gathered (take(), PeerSession.send), so that while frames go out,
    as during a sampler's steps, no other thread wakes for releases: a thread that wakes
    must take the GIL from the one that talks, which on a loaded machine costs up to a
    scheduler slice each time. With no frame going out, a thread of ours sends what
    gathered RELEASE_AFTER_S after the first of it, in one message. The lock is reentrant
    and held only to append or take, so a finalizer that runs while its own thread holds
    it (a collection inside our flush) cannot deadlock. While a frame being made may name
    what is let go of meanwhile (held()), the thread sends nothing: the frame carries it."""

    def __init__(self, channel, name, after_s=RELEASE_AFTER_S):
        self.channel = channel
        self.after_s = after_s
        self.pending = {}
        self.armed = False  # the thread counts down to sending what gathered
        self.holders = 0    # callers inside held()
        self.ready = threading.Condition(threading.RLock())
        self.closed = False
        threading.Thread(target=self._flush, name=f"{name} releases", daemon=True).start()

    def push(self, kind, value):
        with self.ready:
            if not self.closed:
                self.pending.setdefault(kind, []).append(value)
                if not self.armed:
                    self.armed = True
                    if not self.holders:  # else the frame being made carries it, or held() wakes us
                        self.ready.notify()

    @contextlib.contextmanager
    def held(self):
        """Nothing is sent by the thread meanwhile: for a frame that names a block, then lets
        go of what held it, and must go before that release (a worker's result sending back
        an input it let go of: NodeServer.run)."""
        with self.ready:
            self.holders += 1
        try:
            yield
        finally:
            with self.ready:
                self.holders -= 1
                if self.armed and not self.holders:  # what gathered meanwhile and no frame took
                    self.ready.notify()

    def take(self):
        """What gathered, by kind, now the caller's to send; None when nothing did."""
        with self.ready:
            if not self.pending:
                return None
            taken, self.pending = self.pending, {}
            self.armed = False  # nothing left to count down for: a thread counting finds nothing
            return taken

    def close(self):
        with self.ready:
            self.closed = True
            self.pending = {}
            self.ready.notify()

    def _flush(self):
        while True:
            with self.ready:
                while not self.armed and not self.closed:
                    self.ready.wait()
                deadline = time.monotonic() + self.after_s
                while not self.closed and (left := deadline - time.monotonic()) > 0:
                    self.ready.wait(left)  # frames sent meanwhile carry what gathers
                while self.holders and not self.closed:
                    self.ready.wait()  # the frame being made carries it
                if self.closed:
                    return
                self.armed = False
                taken = self.take()
            if taken:
                self.channel.send({"op": "release", **taken})
