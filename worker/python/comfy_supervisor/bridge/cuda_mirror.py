"""Mirrors of CUDA modules (bridge/mirror.py; docs/PACKS.md, "Mirrors"): revoked before their
owner's unload, which waits until the reader let go of the owner's device memory.

A CUDA module's mirror is described by its tensors themselves, which the session's encoder
lends by CUDA IPC where both sides can (cuda_ipc.py: the reader's tensors lie over the
owner's memory), staged otherwise. Memory another process mapped cannot be taken back: the
driver leaves it undefined what an importer's mapping does once the exporter freed the
allocation (cuIpcOpenMemHandle), and the owner keeps each lent tensor until the reader
closed its mapping. So an owner that unloads a model must first have its readers let go,
or upstream's unload frees nothing while the ledger says it did.

- The owner sends each grant with a watch: one end of a socket pair of its own, sent ahead
  on the call socket (SCM_RIGHTS, as a CPU mirror's memfd is, under the grant's key).
- Revocation (mirror.revoke, before an unload) shuts the owner's end for writing: the reader
  sees end of file. It lets go of the grant's tensors, its device's work on them done, and
  closes its end once every mapping under them is closed (cuda_ipc.py's when_unmapped). The
  owner sees end of file in turn and takes back what it lent for the grant, so that the
  unload really frees it.
- The unload waits for that at most REVOKE_WAIT_S. A reader that has not let go by then
  broke the session's rules: its session ends (PeerSession.broke: the host asks the
  supervisor to end that pack's life, as for a broken protocol) with one line naming it,
  and the unload goes on: never a hang. What was lent for the grant stays ours until the
  reader's process is gone (its end of the watch closes then): freed under its mapping, it
  would be the allocator's to hand out again while the reader can still read and write it.
- While a module's unload runs (mirror.unloading), a CUDA grant of it is refused in one
  line: its memory is the unload's to free, and a grant would lend it again.

Why a watch of its own and not a message on the call socket: a worker reads that socket
between nodes and while it waits on the host, not while its node computes; a node that holds
a replica and runs something else for minutes would not hear a message, and the owner's
unload must not wait that long. A thread of the reader waits on every watch of its session
(Watches). It drops a mirror at once; where a forward runs over it, the forward's next
submodule drops it and raises one line (mirror.Mirror), so that no forward ever reads a
weight taken from under it.
"""

import contextlib
import logging
import os
import select
import socket
import threading
import time
import types
import weakref

from .remote import RemoteError

log = logging.getLogger("comfy_supervisor")

# How long an unload waits for the readers of its model's CUDA mirrors. A reader's thread
# wakes on the watch at once and lets go once its device finished the work queued on the
# weights (a block of a forward under way); the rest is the owner's scheduling. Ten seconds
# is far beyond that, and short enough that an unload the arbiter waits on still answers.
REVOKE_WAIT_S = 10.0
_MAX_TENSORS = 1 << 16

_grants = weakref.WeakSet()     # every Grant not revoked yet, of every session
_unloading = {}                 # id of a module whose unload runs -> how many unloads of it
_quarantined = set()            # Grants whose reader kept them: held until its process is gone
_lock = threading.Lock()


# ---- the owner's side ----

class Grant:
    """One grant of a CUDA module to one session: our end of its watch, and the tensors lent
    for it (held weakly here: the session's CudaExchange holds them while they are lent)."""

    def __init__(self, module, views, end, session):
        self.module = weakref.ref(module)
        self.views = [weakref.ref(view) for view in views]
        self.end = end
        self.session = session  # the Grants (CudaGrants) of the session it went to
        self.revoked = False
        self.held = None        # what was lent for it, while a reader that kept it may map it

    def revoke(self):
        """The reader is told: end of file on its end."""
        self.revoked = True
        try:
            self.end.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # its end is closed already: it let go, or its process is gone

    def let_go(self):
        """The reader closed its end (it let go, or its process is gone): what we lent for
        the grant is ours again."""
        self.session.take_back([view() for view in self.views])
        self.close()

    def quarantine(self):
        """The reader kept the grant past its revocation, and its session ends: what was lent
        for it stays ours until the reader's process is gone (its end of the watch closes
        then), and is not freed under its mapping for the allocator to hand out again."""
        self.held = [view() for view in self.views]
        with _lock:
            _grants.discard(self)
            _quarantined.add(self)

    def close(self):
        with _lock:
            _grants.discard(self)
            if self.held is not None:
                return  # quarantined: _release_quarantined closes it
        self.session.forget(self)
        self.end.close()


class CudaGrants:
    """A session's CUDA grants, the owner's side, over the session's `channel` (for the
    watches' descriptors) and `cuda` (its CudaExchange, which holds what was lent);
    `session`: the PeerSession, whose name the log says and whose broke(why) ends it for a
    reader that kept a grant past its revocation."""

    def __init__(self, channel, cuda, session):
        self.channel, self.cuda, self.session = channel, cuda, session
        self.name = session.name if session is not None else "the peer"
        self.live = set()
        self.lock = threading.Lock()

    def broke(self, why):
        if self.session is not None:
            self.session.broke(why)

    def grant(self, module, tensors, recipe, key):
        """The description of a mirror of `module` over its CUDA `tensors` ((name, kind,
        tensor)), its watch sent ahead under `key`."""
        with _lock:
            if id(module) in _unloading:
                raise RemoteError(f"the owner is unloading its {type(module).__name__} (an eviction): load the model "
                                  "again, or run the node again")
        _release_quarantined()
        self._prune()
        # The lent tensor is the one we hold weakly: contiguous already (a copy otherwise,
        # which cuda_ipc.share would make and hold in its place).
        views = [[name, kind, tensor.detach().contiguous()] for name, kind, tensor in tensors]
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.channel.send({"op": "mirror_fd", "key": key}, fds=[theirs.fileno()])
        finally:
            theirs.close()
        grant = Grant(module, [view for _, _, view in views], ours, self)
        with _lock:
            _grants.add(grant)
        with self.lock:
            self.live.add(grant)
        return {"key": key, "recipe": recipe, "cuda": views}

    def take_back(self, views):
        if self.cuda is not None:
            self.cuda.take_back([view for view in views if view is not None])

    def forget(self, grant):
        with self.lock:
            self.live.discard(grant)

    def _prune(self):
        """Grants whose reader let go of them without a revocation (its mirror dropped at
        its node's end, or read again) are closed, so that watches do not pile up."""
        with self.lock:
            live = list(self.live)
        for grant in live:
            if not grant.revoked and _reader_closed(grant.end):
                grant.let_go()

    def close(self):
        """The session ended: its grants go (its CudaExchange let go of their lends)."""
        with self.lock:
            live, self.live = list(self.live), set()
        for grant in live:
            grant.close()


def _reader_closed(end):
    """Whether the reader closed its end of a watch (anything it wrote is read and ignored)."""
    try:
        while True:
            data = end.recv(4096, socket.MSG_DONTWAIT)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def _release_quarantined():
    """Lets go of what readers that were ended kept, once their processes are gone."""
    with _lock:
        gone = [grant for grant in _quarantined if _reader_closed(grant.end)]
        _quarantined.difference_update(gone)
    for grant in gone:
        grant.held = None
        grant.session.forget(grant)
        grant.end.close()


def revoke(under, wait_s=None):
    """Revokes every CUDA grant of a module whose id is in `under`, and waits, at most
    `wait_s` (REVOKE_WAIT_S), until each reader let go of it; a session whose reader did not
    is ended. Returns how many grants were revoked."""
    wait_s = REVOKE_WAIT_S if wait_s is None else wait_s
    _release_quarantined()
    with _lock:
        hit = [grant for grant in _grants if not grant.revoked and id(grant.module()) in under]
    for grant in hit:
        grant.revoke()
    pending = {grant.end.fileno(): grant for grant in hit if grant.end.fileno() >= 0}
    deadline = time.monotonic() + wait_s
    poller = select.poll()
    for fd in pending:
        poller.register(fd, select.POLLIN)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        for fd, _ in poller.poll(max(1, int(left * 1000))):
            grant = pending.get(fd)
            if grant is not None and _reader_closed(grant.end):
                poller.unregister(fd)
                del pending[fd]
                grant.let_go()
    kept = {}
    for grant in pending.values():
        grant.quarantine()
        kept.setdefault(id(grant.session), (grant.session, []))[1].append(grant)
    for session, grants in kept.values():
        what = type(grants[0].module()).__name__
        log.error("comfy-supervisor: %s kept the mappings of a CUDA %s past its revocation for %.0f s; its session is "
                  "ended, and that memory is freed once its process is gone", session.name, what, wait_s)
        session.broke(f"it kept a revoked CUDA mirror of a {what} for {wait_s:.0f} s")
    return len(hit)


@contextlib.contextmanager
def unloading(under):
    """While the block runs (the owner's unload of a model), no CUDA grant of a module whose
    id is in `under` is made."""
    with _lock:
        for module_id in under:
            _unloading[module_id] = _unloading.get(module_id, 0) + 1
    try:
        yield
    finally:
        with _lock:
            for module_id in under:
                left = _unloading.pop(module_id) - 1
                if left:
                    _unloading[module_id] = left


# ---- the reader's side ----

def checked(entries, what):
    """name -> (kind, tensor) of a CUDA mirror's description, each entry checked."""
    import torch
    if not isinstance(entries, list) or len(entries) > _MAX_TENSORS:
        raise RemoteError(f"{what}: a mirror's description that is malformed")
    tensors = {}
    for entry in entries:
        if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str) and
                entry[1] in ("parameter", "buffer") and isinstance(entry[2], torch.Tensor)):
            raise RemoteError(f"{what}: a mirror's tensor that is malformed")
        tensors[entry[0]] = (entry[1], entry[2])
    return tensors


def count_forwards(mirror):
    """The mirror's module counts the forwards under way over it, whatever ends them (an
    exception skips forward hooks): its CUDA grant's watch drops it only between forwards.
    A method of the module, so that a copy of it (copy.deepcopy) calls its own forward."""
    found = weakref.ref(mirror)

    def forward(module, *args, **kwargs):
        counting = found()
        if counting is None:
            return type(module).forward(module, *args, **kwargs)
        with counting.lock:
            counting.forwards += 1
        try:
            return type(module).forward(module, *args, **kwargs)
        finally:
            with counting.lock:
                counting.forwards -= 1
                counting.on_revoked()  # a revocation that came meanwhile, once no forward runs

    mirror.module.forward = types.MethodType(forward, mirror.module)


class Watches:
    """The reader's side of a session's watches: one thread waits on all of them, and calls
    a watch's `revoked` when its owner revoked it (or its owner's process went away)."""

    def __init__(self, name):
        self.name = name
        # Reentrant: a mapping's finalizer (cuda_ipc.py) lets go of a watch, at any allocation.
        self.lock = threading.RLock()
        self.watched = {}     # fd -> revoked(), until it fires
        self.fired = set()    # fds that fired, open until their mirror let go
        self.closing = set()  # fds whose mirror let go: the thread closes them
        self.wake = None      # (read, write) of the thread's wake-up pipe
        self.thread = None
        self.closed = False

    def add(self, fd, revoked):
        """Watches `fd` (ours now) for `revoked`."""
        with self.lock:
            if self.closed:
                os.close(fd)
                return
            if self.thread is None:
                self.wake = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
                self.thread = threading.Thread(target=self._run, name=f"{self.name} mirror watches", daemon=True)
                self.thread.start()
            self.watched[fd] = revoked
        self._wake()

    def let_go(self, fd):
        """The mirror let go of everything of the watch's grant: its end closes, and the
        owner sees end of file."""
        with self.lock:
            self.watched.pop(fd, None)
            self.fired.discard(fd)
            if self.thread is None:
                os.close(fd)
                return
            self.closing.add(fd)
        self._wake()

    def close(self):
        with self.lock:
            self.closed = True
        self._wake()

    def _wake(self):
        try:
            os.write(self.wake[1], b"w")
        except (BlockingIOError, TypeError):
            pass  # awake already, or no thread

    def _run(self):
        while True:
            with self.lock:
                closing, self.closing = self.closing, set()
                for fd in closing:
                    os.close(fd)
                if self.closed and not self.watched and not self.fired:
                    os.close(self.wake[0]), os.close(self.wake[1])
                    self.wake = None
                    return
                fds = list(self.watched)
            readable, _, _ = select.select([self.wake[0], *fds], [], [])  # few: a session's mirrors
            if self.wake[0] in readable:
                while True:
                    try:
                        if not os.read(self.wake[0], 4096):
                            break
                    except BlockingIOError:
                        break
            for fd in readable:
                with self.lock:
                    revoked = self.watched.pop(fd, None)
                    if revoked is not None:
                        self.fired.add(fd)
                if revoked is not None:
                    try:
                        revoked()
                    except Exception:  # noqa: BLE001 (the thread lives on for the other mirrors)
                        log.exception("comfy-supervisor: dropping a revoked CUDA mirror failed")


class Watch:
    """One CUDA grant as its reader holds it: its watch, and the owner's allocations this
    process mapped for it (cuda_ipc's lends), which must be closed before the owner hears."""

    def __init__(self, watches, cuda, fd, tensors, revoked):
        self.watches, self.cuda, self.fd = watches, cuda, os.dup(fd)
        self.revoked = False
        pointers = {tensor.data_ptr() for _, tensor in tensors.values() if tensor.is_cuda}
        self.lends = cuda.lends_at(pointers) if cuda is not None else set()
        self.released = False

        def fired():
            self.revoked = True
            revoked()

        watches.add(self.fd, fired)

    def release(self):
        """The mirror let go of the grant's tensors: once their mappings are closed (at once,
        unless the pack's code still holds a weight), the owner hears it."""
        if self.released:
            return
        self.released = True
        if self.cuda is None:
            self.watches.let_go(self.fd)
        else:
            self.cuda.when_unmapped(self.lends, lambda: self.watches.let_go(self.fd))
