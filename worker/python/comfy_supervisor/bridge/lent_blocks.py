"""The books of the blocks of our own arena that a peer was sent, and, on the host's side,
the blocks kept for the tensors they were written from, so that a tensor sent again while
nobody wrote it since is named again instead of copied again.

A block is named in a message (a value's tensor) and released by the peer once per
naming: `namings` counts them, and a block goes when its count falls to 0. So a release the
peer sent for an earlier naming, still in flight when the host names the block again, lets
go of that earlier naming only: the block stays the peer's until the last one is released.

The host keeps the block of a tensor it wrote (arena.OwnArena) after the peer released
it, in `cached`, while that tensor lives and is unchanged: the same Python object (a weak
reference), the same place, shape, strides and dtype, and the same count of in-place
writes (torch's version counter, which every in-place write bumps, through a view too).
A tensor torch keeps no count for is not kept: an inference tensor (made under
torch.inference_mode, as ComfyUI runs its nodes) and one written only where torch does not
count (through .numpy() or .data) would read stale, so an inference tensor is written each
time it is sent.

Containment: the host never writes a block while the peer holds it or it is kept: the
arena's allocator hands out free blocks only, and a kept block is freed (by the host's own
thread, under the lock) before it can be handed out again. What it costs is arena room and
resident memory, a second copy of each kept tensor: a kept block is freed when its tensor
is collected or written, when the arena has no free block for a new write (least recently
named first, before ArenaFull), when the kept blocks of every session pass
KEEP_CACHED_BYTES (the session's own, least recently named first), and when the session
ends.
"""

import collections
import threading
import weakref

from .arena import ArenaFull, ByteBudget

KEEP_CACHED_BYTES = 512 << 20  # kept blocks, over every arena this process writes
_BUDGET = ByteBudget(KEEP_CACHED_BYTES)


class _Ref(weakref.ref):
    """A weak reference to the tensor a block was written from, which knows the block."""
    __slots__ = ("offset",)


class _Source:
    """A tensor whose bytes a block holds, as it was when they were written."""
    __slots__ = ("ref", "version", "form")

    def __init__(self, tensor, offset, collected):
        self.ref = _Ref(tensor, collected)
        self.ref.offset = offset
        self.version = tensor._version
        self.form = _form_of(tensor)

    def tensor(self):
        """The tensor, where it lives and nobody wrote it since; else None."""
        tensor = self.ref()
        if tensor is None or tensor._version != self.version or _form_of(tensor) != self.form:
            return None
        return tensor


def _form_of(tensor):
    return tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype


def keeps_count(tensor):
    """Whether torch counts the tensor's in-place writes (an inference tensor has no count)."""
    return not tensor.is_inference()


class LentBlocks:
    """`arena`: the arena.OwnArena we write for the peer; `keep`: keep the blocks of
    tensors we wrote for resending (the host)."""

    def __init__(self, arena, keep):
        self.arena = arena
        self.keep = keep
        self.lock = threading.Lock()
        self.namings = {}    # block -> namings the peer has not released yet
        self.sources = {}    # block -> _Source: the tensor whose bytes it holds
        self.by_tensor = {}  # id(tensor) -> the block kept for it
        self.cached = collections.OrderedDict()  # blocks nobody holds, kept; the least recently named first
        self.cached_bytes = 0
        self.collected = collections.deque()     # _Refs whose tensor was collected: their blocks go
        self.closed = False

    # ---- naming ----

    def named_again(self, tensor):
        """The block already holding `tensor`'s bytes as they are now, counted as named once
        more, or None. The caller names it in a message, or gives the naming back."""
        if not self.keep:
            return None
        with self.lock:
            self._forget_collected()
            offset = self.by_tensor.get(id(tensor))
            source = self.sources.get(offset)
            if source is None or source.ref() is not tensor:
                return None
            if source.tensor() is None:  # written since: the next write goes to a new block
                self._forget(offset)
                return None
            if offset in self.cached:
                self._uncache(offset)
            self.namings[offset] = self.namings.get(offset, 0) + 1
            return offset

    def allocate(self, nbytes):
        """A free block of `nbytes`; kept blocks are freed for it, least recently named
        first, before the arena is full."""
        while True:
            try:
                return self.arena.allocate(nbytes)
            except ArenaFull:
                with self.lock:
                    self._forget_collected()
                    if not self.cached:
                        raise
                    self._free_cached(next(iter(self.cached)))

    def lend(self, written, sources):
        """The blocks `written` (each named once) are the peer's now; `sources`: block -> the
        tensor whose bytes it holds. False when the session ended: nothing was taken."""
        with self.lock:
            if self.closed:
                return False
            for offset in written:
                self.namings[offset] = 1
                tensor = sources.get(offset) if self.keep else None
                if tensor is not None and keeps_count(tensor):
                    older = self.by_tensor.get(id(tensor))
                    if older in self.cached:  # written anew, its older block found by nobody now
                        self._free_cached(older)
                    self.sources[offset] = _Source(tensor, offset, self._collected)
                    self.by_tensor[id(tensor)] = offset
            return True

    def take_back(self, written, named_again):
        """A message that was not sent: its new blocks are free again, its namings undone."""
        for offset in written:
            self.arena.free(offset)
        with self.lock:
            for offset in named_again:
                if offset in self.namings:  # else the session ended meanwhile, and freed it
                    self._let_go(offset)

    # ---- the peer ----

    def holds(self, offset):
        with self.lock:
            return offset in self.namings

    def source_of(self, offset):
        """The tensor whose bytes the block the peer holds are, unchanged; else None."""
        with self.lock:
            source = self.sources.get(offset) if offset in self.namings else None
        return source.tensor() if source is not None else None

    def released(self, offsets):
        """The peer let go of one naming of each block in `offsets` (a list it sent)."""
        with self.lock:
            self._forget_collected()
            for offset in offsets:
                if type(offset) is int and offset in self.namings:  # never another session's block
                    self._let_go(offset)

    def close(self):
        """The session ended: every block is ours and free again."""
        with self.lock:
            self.closed = True
            for offset in list(self.cached):
                self._uncache(offset)
            for offset in set(self.namings) | set(self.sources):
                self.arena.free(offset)
            self.namings.clear()
            self.sources.clear()
            self.by_tensor.clear()

    # ---- under the lock ----

    def _let_go(self, offset):
        count = self.namings[offset] - 1
        if count:
            self.namings[offset] = count
            return
        del self.namings[offset]
        source = self.sources.get(offset)
        if source is None or source.tensor() is None or self.by_tensor.get(id(source.ref())) != offset:
            self._forget(offset)
            return
        size = self.arena.size_of(offset)
        while not _BUDGET.take(size):
            if not self.cached:
                self._forget(offset)
                return
            self._free_cached(next(iter(self.cached)))
        self.cached[offset] = size
        self.cached_bytes += size

    def _uncache(self, offset):
        size = self.cached.pop(offset)
        self.cached_bytes -= size
        _BUDGET.give_back(size)

    def _free_cached(self, offset):
        self._uncache(offset)
        self._forget(offset)

    def _forget(self, offset):
        """The block holds no tensor for us any more; freed unless the peer holds it."""
        source = self.sources.pop(offset, None)
        if source is not None:
            tensor = source.ref()
            if tensor is not None and self.by_tensor.get(id(tensor)) == offset:
                del self.by_tensor[id(tensor)]
            else:  # collected: its entry's id may be another tensor's by now
                stale = [key for key, block in self.by_tensor.items() if block == offset]
                for key in stale:
                    del self.by_tensor[key]
        if offset in self.cached:
            self._uncache(offset)
        if offset not in self.namings:
            self.arena.free(offset)

    def _collected(self, ref):
        """A kept tensor was collected, in whichever thread let go of it last, at any time:
        its block goes now where the lock is free, else at the next use of these books."""
        self.collected.append(ref)
        if self.lock.acquire(blocking=False):
            try:
                self._forget_collected()
            finally:
                self.lock.release()

    def _forget_collected(self):
        while self.collected:
            ref = self.collected.popleft()
            source = self.sources.get(ref.offset)
            if source is not None and source.ref is ref and not self.closed:
                self._forget(ref.offset)
