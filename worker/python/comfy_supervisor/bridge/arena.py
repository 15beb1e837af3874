"""Value arenas: where a tensor's bytes cross between the ComfyUI host and a pack's worker.

Each life of a participant that takes part in node calls has one arena of its own: a
memfd the supervisor made for that life and sealed against resizing (COMFY_SV_ARENA_FD,
COMFY_SV_ARENA_BYTES). Only that process writes it. A tensor it sends is written once into
a block of its arena. The peer maps the arena from a read-only descriptor the supervisor
handed it (PeerArena), privately: its tensor is built over the same pages, and a node that
writes into a tensor it received gets copies of the pages it touches, never the
producer's. When the peer's tensor storage is collected, the peer drops the copies it made
of that block's pages (else its mapping would keep showing them when the producer writes
the block again) and says so, and the producer frees the block. Blocks are whole pages, so
that no two share one. When a life ends, its arena goes with the last
mapping of it: the kernel frees it, whoever held blocks.

The arena's first page is not for blocks: it holds the interrupt word, the id of the
node call its owner asks to stop (the host writes it, the worker's interrupt checks read
it: no thread and no message between a Cancel and the node's next check). A whole page,
so that a peer writing into a tensor it received never copies that page privately and
stops seeing the word.

The block allocator is our own, a first-fit free list in the producer's private memory:
the arena's bytes are data only, and the peer can neither see nor corrupt the bookkeeping.
"""

import bisect
import ctypes
import mmap
import os
import struct
import threading
import weakref

PAGE = mmap.PAGESIZE
ALIGNMENT = PAGE  # a page holds one block's bytes only: a peer's private copies go with the block
# Freed bytes kept in memory for the next write (a write into fresh pages faults each one
# in); past this, a freed block's pages go back to the kernel.
KEEP_RESIDENT_BYTES = 256 << 20


CONTROL_BYTES = PAGE            # the first page: the interrupt word
_INTERRUPT_WORD = struct.Struct("<I")  # 4 aligned bytes: one store, never torn


class ArenaFull(RuntimeError):
    """No block of the size asked for is free in the arena; the message is one line."""


def _round_up(value, to):
    return (value + to - 1) // to * to


class BlockAllocator:
    """First-fit blocks of a fixed range, by offset. Not thread-safe: OwnArena locks."""

    def __init__(self, capacity, start=0):
        self.capacity = capacity
        self.free_offsets = [start]    # sorted starts of the free ranges
        self.free_sizes = {start: capacity - start}  # start -> size
        self.blocks = {}               # start of an allocated block -> its size
        self.used = 0

    def allocate(self, nbytes):
        size = _round_up(max(nbytes, 1), ALIGNMENT)
        for start in self.free_offsets:
            room = self.free_sizes[start]
            if room >= size:
                self._take_free(start)
                if room > size:
                    self._add_free(start + size, room - size)
                self.blocks[start] = size
                self.used += size
                return start
        return None

    def free(self, offset):
        """The size of the block at `offset`, now free; None when no block starts there."""
        size = self.blocks.pop(offset, None)
        if size is None:
            return None
        self.used -= size
        start, end = offset, offset + size
        index = bisect.bisect_left(self.free_offsets, start)
        if index < len(self.free_offsets) and self.free_offsets[index] == end:  # joins the next
            end += self.free_sizes[end]
            self._take_free(self.free_offsets[index])
        if index > 0:  # joins the previous
            previous = self.free_offsets[index - 1]
            if previous + self.free_sizes[previous] == start:
                start = previous
                self._take_free(previous)
        self._add_free(start, end - start)
        return size

    def _take_free(self, start):
        self.free_offsets.pop(bisect.bisect_left(self.free_offsets, start))
        del self.free_sizes[start]

    def _add_free(self, start, size):
        bisect.insort(self.free_offsets, start)
        self.free_sizes[start] = size


class OwnArena:
    """This process's arena, mapped shared and writable: the blocks it lends to peers.

    A block is freed when its last holder lets go: the peer it was lent to (its release,
    or the end of its life), and tensors of ours built over it when the peer sent it back
    to us as it was (values.py: a tensor returned unchanged crosses back without a copy)."""

    def __init__(self, fd, nbytes):
        self.map = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        # Our own blocks sent back to us are read through a private mapping, as a peer's
        # are: a node that writes into one gets its own copy, and neither the block the
        # peer still reads nor what we lent changes under anyone.
        self.returned = _PrivateMapping(fd, nbytes)
        os.close(fd)
        self.capacity = nbytes
        self.allocator = BlockAllocator(nbytes, start=CONTROL_BYTES)
        self.lock = threading.Lock()  # blocks are taken by the calling thread, freed by readers
        self.kept_resident = 0
        self.holders = {}  # start of an allocated block -> how many hold it

    @classmethod
    def from_environment(cls):
        """The arena the supervisor made for this life; None when it made none."""
        fd = os.environ.get("COMFY_SV_ARENA_FD")
        nbytes = os.environ.get("COMFY_SV_ARENA_BYTES")
        if not fd or not nbytes:
            return None
        return cls(int(fd), int(nbytes))

    @property
    def used(self):
        with self.lock:
            return self.allocator.used

    def allocate(self, nbytes):
        with self.lock:
            offset = self.allocator.allocate(nbytes)
            if offset is None:
                raise ArenaFull(f"the value arena has no free block of {nbytes} bytes "
                                f"({self.allocator.used} of {self.capacity} bytes in use): "
                                "raise arena_bytes in the supervisor's config")
            self.kept_resident = max(0, self.kept_resident - nbytes)
            self.holders[offset] = 1
            return offset

    def size_of(self, offset):
        """The size of the allocated block at `offset`, or None."""
        with self.lock:
            return self.allocator.blocks.get(offset)

    def held_view(self, offset, at, nbytes):
        """A view of `nbytes` at `at` in our block `offset`, which holds the block until the
        view and every tensor over it are collected."""
        with self.lock:
            self.holders[offset] += 1
        import numpy
        array = numpy.frombuffer(self.returned.map, dtype=numpy.uint8, count=nbytes, offset=offset + at)
        weakref.finalize(array, self._returned_released, offset)
        return array

    def _returned_released(self, offset):
        size = self.size_of(offset)
        if size is not None:
            self.returned.drop_copies(offset, size)
        self.free(offset)

    def free(self, offset):
        """One holder of the block at `offset` lets go; the last frees it. False when no
        block starts there (a peer's bad release)."""
        with self.lock:
            holders = self.holders.get(offset)
            if holders is None:
                return False
            if holders > 1:
                self.holders[offset] = holders - 1
                return True
            del self.holders[offset]
            size = self.allocator.free(offset)
            if self.kept_resident + size <= KEEP_RESIDENT_BYTES:
                self.kept_resident += size
            else:
                start, end = _round_up(offset, PAGE), (offset + size) // PAGE * PAGE
                if end > start:
                    self.map.madvise(mmap.MADV_REMOVE, start, end - start)
            return True

    def interrupt(self, call_id):
        """Asks the peer to stop node call `call_id` (at the node's next interrupt check)."""
        _INTERRUPT_WORD.pack_into(self.map, 0, call_id & 0xFFFFFFFF)

    def view(self, offset, nbytes):
        """A writable numpy view of `nbytes` at `offset`."""
        import numpy
        return numpy.frombuffer(self.map, dtype=numpy.uint8, count=nbytes, offset=offset)


class _PrivateMapping:
    """An arena mapped privately (MAP_PRIVATE): its pages are the producer's until this
    process writes one, which then becomes this process's own copy."""

    def __init__(self, fd, capacity):
        self.capacity = capacity
        self.map = mmap.mmap(fd, capacity, flags=mmap.MAP_PRIVATE,
                             prot=mmap.PROT_READ | mmap.PROT_WRITE) if capacity else None
        self.base = 0
        if self.map is not None:
            anchor = ctypes.c_char.from_buffer(self.map)
            self.base = ctypes.addressof(anchor)
            del anchor

    def block_holding(self, address, nbytes):
        """(block offset, offset within it) of a peer's block we hold a view of that holds
        `nbytes` bytes at `address` unchanged (no page of them copied privately here), or None."""
        if not self.base <= address < self.base + self.capacity:
            return None
        relative = address - self.base
        for offset, size in list(self.viewed.items()):
            if offset <= relative and relative + nbytes <= offset + size:
                first = relative // PAGE * PAGE
                pages = (_round_up(relative + nbytes, PAGE) - first) // PAGE
                if _copied_pages(self.base + first, pages) is not False:
                    return None  # written here (or not knowable): the peer's bytes are not these
                return offset, relative - offset
        return None

    def drop_copies(self, offset, nbytes):
        """Drops this process's private copies of the block's pages, if it wrote into
        any, so that the block reads the producer's bytes again when it is reused. Only
        blocks written into pay for it (their pages fault in again): /proc/self/pagemap
        tells a copied page (anonymous) from the producer's (file-backed); where it cannot
        be read, every released block's pages are dropped."""
        start, length = offset, _round_up(nbytes, PAGE)
        if length == 0:
            return
        if _copied_pages(self.base + start, length // PAGE) is False:
            return
        self.map.madvise(mmap.MADV_DONTNEED, start, length)


class PeerArena(_PrivateMapping):
    """A peer's arena, mapped privately from a read-only descriptor: read in place."""

    def __init__(self, fd):
        super().__init__(fd, os.fstat(fd).st_size)
        os.close(fd)
        self.viewed = {}  # offset -> size of the peer's blocks we hold views of

    def interrupted(self, call_id):
        """The peer asked to stop node call `call_id`."""
        return self.map is not None and self.capacity >= CONTROL_BYTES and \
            _INTERRUPT_WORD.unpack_from(self.map, 0)[0] == call_id & 0xFFFFFFFF

    def view(self, offset, nbytes, on_release):
        """A numpy view of the peer's block; `on_release(offset)` runs once when the view and
        every tensor over it are collected. The view keeps the mapping alive."""
        import numpy
        if self.map is None or offset < CONTROL_BYTES or nbytes < 0 or offset + nbytes > self.capacity:
            raise ValueError(f"a block of {nbytes} bytes at {offset} is outside the peer's "
                             f"{self.capacity}-byte arena")
        array = numpy.frombuffer(self.map, dtype=numpy.uint8, count=nbytes, offset=offset)
        self.viewed[offset] = nbytes
        weakref.finalize(array, self._released, offset, nbytes, on_release)
        return array

    def _released(self, offset, nbytes, on_release):
        self.viewed.pop(offset, None)
        self.drop_copies(offset, nbytes)
        on_release(offset)


_PAGEMAP = None  # this process's /proc/self/pagemap, opened once; False: cannot be read


def _copied_pages(address, pages):
    """Whether any of `pages` pages from `address` is this process's own copy (present,
    and neither file-backed nor shared: pagemap bits 63 and 61); None when the kernel
    does not let us read the page map."""
    global _PAGEMAP
    if _PAGEMAP is None:
        try:
            _PAGEMAP = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            _PAGEMAP = False
    if _PAGEMAP is False:
        return None
    try:
        data = os.pread(_PAGEMAP, pages * 8, address // PAGE * 8)
    except OSError:
        return None
    if len(data) != pages * 8:
        return None
    import numpy
    entries = numpy.frombuffer(data, dtype=numpy.uint64)
    present, file_backed = numpy.uint64(1 << 63), numpy.uint64(1 << 61)
    return bool(numpy.any((entries & present != 0) & (entries & file_backed == 0)))
