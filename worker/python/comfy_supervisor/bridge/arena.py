"""Value arenas: where a tensor's bytes cross between the ComfyUI host and a pack's worker.

Each producer and consumer pair has an arena of its own: a memfd the supervisor made and
sealed against resizing, which only the producer writes and only its consumer is given.

- A pack's worker writes one per life (COMFY_SV_ARENA_FD, COMFY_SV_ARENA_BYTES): its
  outputs, which the host's lives read.
- The host writes one for each pack life it is paired with (handed to it with
  pack_started, and to that pack alone, read-only, with host_started): what the host
  sends a pack lies where no other pack can map it.

A block is whole pages, so that no two share one. The two directions are read
differently, because what matters is who can still write a block once it was handed over:

- A worker reads the host's blocks in place (PeerArena). It maps the arena privately from
  its read-only descriptor: its tensor is built over the same pages, and a node that
  writes into a tensor it received gets copies of the pages it touches, never the
  host's. When its tensor storage is collected, it drops the copies it made of that
  block's pages (else its mapping would keep showing them when the host writes the block
  again) and says so, once for each time the host named the block, and the host frees
  the block, or keeps it for the tensor it holds, to name it again if that tensor is sent
  again unwritten (lent_blocks.py; PeerArena.take says how the worker reads a block named
  again while it still holds a view of it). The host never writes a block the worker
  holds or one it keeps: its allocator hands out free blocks only. A worker can reopen its descriptor
  writable (a memfd's mode lets its owner) and write the arena the host writes for it:
  that changes only what the host sent that worker. The host keeps nothing over it: a
  tensor the worker sends back as it came is the host's own tensor again (session.py).
- The host copies a worker's blocks as they arrive (CopiedArena) and lets each go at
  once: the worker that wrote a block can write it again after its node returned, and
  ComfyUI caches node outputs. It reads them with pread, so the worker's blocks are never
  mapped here and its holes read as zeros without taking memory.

Every arena starts with a page that is not for blocks, the control page. A whole page, so
that a worker writing into a tensor it received never copies that page privately and
stops seeing it. It holds two words, each written by the arena's producer only:

- the interrupt word (the arena the host writes for a pack): the id of the node call the
  host asks that pack to stop. The worker's interrupt checks read it: no thread and no
  message between a Cancel and the node's next check;
- the frames word: how many frames the producer sent on its call sockets, counted after
  each is written. A reader about to sleep on its call socket watches the word for a
  short while first (channel.Channel.receive): a read of shared memory where a wait on the
  socket would cost a wake-up through the kernel, and no system call while it watches.
  The host maps only this page of a worker's arena, and never writes it. A word a peer wrote
  wrongly only ends a watch early or lets it run its short course: the socket decides.

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
# in), over all the arenas a process writes; past this, a freed block's pages go back to
# the kernel.
KEEP_RESIDENT_BYTES = 256 << 20


CONTROL_BYTES = PAGE            # the first page: the interrupt word and the frames word
_INTERRUPT_WORD = struct.Struct("<I")  # 4 aligned bytes: one store, never torn
_FRAMES_AT = 64                 # the frames word, a cache line away from the interrupt word


def _address_of(mapping):
    """Where a writable mapping starts in this process's memory."""
    anchor = ctypes.c_char.from_buffer(mapping)
    address = ctypes.addressof(anchor)
    del anchor  # a buffer exported to ctypes would keep the mapping from closing
    return address


def _frames_word(mapping):
    """The frames word of a mapped control page, as a one-item view: each access to it is
    one aligned 4-byte load or store (a memoryview of format "I" copies the item whole)."""
    return memoryview(mapping)[_FRAMES_AT:_FRAMES_AT + 4].cast("I")


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


class ByteBudget:
    """Bytes held for later, counted over every arena this process writes (the host writes
    one per pack life), at most `limit` in all; take() says whether there is room."""

    def __init__(self, limit):
        self.lock = threading.Lock()
        self.limit = limit
        self.bytes = 0

    def take(self, nbytes):
        with self.lock:
            if self.bytes + nbytes > self.limit:
                return False
            self.bytes += nbytes
            return True

    def give_back(self, nbytes):
        with self.lock:
            self.bytes -= nbytes


_KEPT = ByteBudget(KEEP_RESIDENT_BYTES)  # freed bytes left in memory for the next write


class OwnArena:
    """An arena this process writes, mapped shared and writable: the blocks it lends its
    peer, each freed when the peer lets go of it or the session ends."""

    def __init__(self, fd, nbytes=None):
        nbytes = os.fstat(fd).st_size if nbytes is None else nbytes
        self.map = mmap.mmap(fd, nbytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        os.close(fd)
        self.capacity = nbytes
        self.allocator = BlockAllocator(nbytes, start=CONTROL_BYTES)
        self.lock = threading.Lock()  # blocks are taken by the calling thread, freed by readers
        self.kept = 0                 # freed bytes of this arena left in memory (counted in _KEPT)
        self.closed = False
        self.frames = _frames_word(self.map)  # bumped by Channel.send, under its send lock

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
            reused = min(self.kept, nbytes)
            self.kept -= reused
            _KEPT.give_back(reused)
            return offset

    def size_of(self, offset):
        """The size of the allocated block at `offset`, or None."""
        with self.lock:
            return self.allocator.blocks.get(offset)

    def free(self, offset):
        """Frees the block at `offset`; False when no block starts there (a peer's bad release)."""
        with self.lock:
            size = self.allocator.free(offset)
            if size is None:
                return False
            if not self.closed and _KEPT.take(size):
                self.kept += size
            else:
                start, end = _round_up(offset, PAGE), (offset + size) // PAGE * PAGE
                if end > start:
                    self.map.madvise(mmap.MADV_REMOVE, start, end - start)
            return True

    def close(self):
        """The peer's life is over and nothing of ours lies in the arena any more (the host's
        arena for one pack life): its memory goes back to the kernel now, not when the
        mapping is collected. A block written after this is freed as any other."""
        with self.lock:
            self.closed = True
            _KEPT.give_back(self.kept)
            self.kept = 0
            self.map.madvise(mmap.MADV_REMOVE, 0, self.capacity)

    def interrupt(self, call_id):
        """Asks the peer to stop node call `call_id` (at the node's next interrupt check)."""
        _INTERRUPT_WORD.pack_into(self.map, 0, call_id & 0xFFFFFFFF)

    def view(self, offset, nbytes):
        """A writable numpy view of `nbytes` at `offset`."""
        import numpy
        return numpy.frombuffer(self.map, dtype=numpy.uint8, count=nbytes, offset=offset)

    def copy(self, offset, nbytes):
        """A copy of `nbytes` at `offset`, in this process's own memory."""
        return self.view(offset, nbytes).copy()


class PeerArena:
    """A peer's arena read in place: mapped privately (MAP_PRIVATE) from a read-only
    descriptor, its pages are the producer's until this process writes one, which then
    becomes this process's own copy."""

    def __init__(self, fd):
        self.capacity = os.fstat(fd).st_size
        self.map = mmap.mmap(fd, self.capacity, flags=mmap.MAP_PRIVATE,
                             prot=mmap.PROT_READ | mmap.PROT_WRITE) if self.capacity else None
        self.fd = fd  # kept, to map a block apart (take()); closed with this object
        weakref.finalize(self, os.close, fd)
        self.base = 0
        self.frames = None  # the producer's frames word, where the arena has a control page
        if self.map is not None:
            self.base = _address_of(self.map)
            if self.capacity >= CONTROL_BYTES:
                self.frames = _frames_word(self.map)
        self.frames_address = self.base + _FRAMES_AT if self.frames is not None else None
        self.viewed = {}  # offset -> [size, views held] of the peer's blocks we view in self.map
        self.apart = {}   # address -> (offset, size) of the peer's blocks we hold mapped apart
        # Views are let go of by finalizers, in any thread, at any time: one that runs in
        # the thread inside take() (a collection there) is done as take() ends.
        self.lock = threading.RLock()
        self.taking = False
        self.deferred = []

    def interrupted(self, call_id):
        """The peer asked to stop node call `call_id`."""
        return self.map is not None and self.capacity >= CONTROL_BYTES and \
            _INTERRUPT_WORD.unpack_from(self.map, 0)[0] == call_id & 0xFFFFFFFF

    def take(self, offset, nbytes, on_release):
        """A numpy view of the peer's block; `on_release(offset)` runs once when the view and
        every tensor over it are collected (once per take: the producer counts its namings
        of a block). The view keeps its mapping alive.

        The producer may name a block again while we still hold a view of it from an earlier
        naming (it sent the same tensor again, unchanged). The new view must read the
        producer's bytes: over the same pages where none of them was written here (the two
        views are then one tensor's, as in one process), else over the block mapped apart,
        privately again, so that our writes through the earlier view stay out of it."""
        import numpy
        if self.map is None or offset < CONTROL_BYTES or nbytes < 0 or offset + nbytes > self.capacity:
            raise ValueError(f"a block of {nbytes} bytes at {offset} is outside the peer's "
                             f"{self.capacity}-byte arena")
        deferred = []
        try:
            with self.lock:
                self.taking = True
                try:
                    held, where = self.viewed.get(offset), None
                    if held is None:
                        array = numpy.frombuffer(self.map, dtype=numpy.uint8, count=nbytes, offset=offset)
                        self.viewed[offset] = [nbytes, 1]
                    elif held[0] == nbytes and self._unwritten(offset, nbytes):
                        array = numpy.frombuffer(self.map, dtype=numpy.uint8, count=nbytes, offset=offset)
                        held[1] += 1
                    else:
                        array, where = self._map_apart(offset, nbytes)
                    weakref.finalize(array, self._released, offset, where, on_release)
                finally:
                    self.taking = False
                    deferred, self.deferred = self.deferred, []
        finally:
            for released in deferred:
                self._released(*released)
        return array

    def _unwritten(self, offset, nbytes):
        """Whether no page of the block is our own copy (False where it cannot be known)."""
        first = offset // PAGE * PAGE
        return _copied_pages(self.base + first, (_round_up(offset + nbytes, PAGE) - first) // PAGE) is False

    def _map_apart(self, offset, nbytes):
        """A view of the block over a private mapping of its own, and that mapping's address."""
        import numpy
        start = offset // PAGE * PAGE
        mapping = mmap.mmap(self.fd, max(_round_up(offset + nbytes, PAGE) - start, PAGE), flags=mmap.MAP_PRIVATE,
                            prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=start)
        address = _address_of(mapping) + offset - start
        self.apart[address] = (offset, nbytes)
        return numpy.frombuffer(mapping, dtype=numpy.uint8, count=nbytes, offset=offset - start), address

    def _released(self, offset, where, on_release):
        with self.lock:
            if self.taking:
                self.deferred.append((offset, where, on_release))
                return
            if where is not None:
                del self.apart[where]  # its mapping goes with the view
            else:
                held = self.viewed[offset]
                held[1] -= 1
                if not held[1]:
                    del self.viewed[offset]
                    self.drop_copies(offset, held[0])
        on_release(offset)

    def block_holding(self, address, nbytes):
        """(block offset, offset within it) of a peer's block we hold a view of that holds
        `nbytes` bytes at `address` unchanged (no page of them copied privately here), or None."""
        with self.lock:
            held = [(self.base + offset, offset, size) for offset, (size, _) in self.viewed.items()]
            held += [(start, offset, size) for start, (offset, size) in self.apart.items()]
        for start, offset, size in held:
            if start <= address and address + nbytes <= start + size:
                first = address // PAGE * PAGE
                pages = (_round_up(address + nbytes, PAGE) - first) // PAGE
                if _copied_pages(first, pages) is not False:
                    return None  # written here (or not knowable): the peer's bytes are not these
                return offset, address - start
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


class CopiedArena:
    """A peer's arena read by copying: each block read into this process's own memory as
    it arrives (pread: its blocks are never mapped here, and its holes read as zeros
    without taking memory) and let go at once, so that what the peer writes into it afterwards
    changes nothing here. Only its control page is mapped, and never written."""

    def __init__(self, fd):
        self.fd = fd
        self.capacity = os.fstat(fd).st_size
        self.lock = threading.Lock()  # close() never frees the descriptor's number under a read
        # The producer's frames word: its control page mapped alone, privately (so that its
        # address can be taken) and never written, so that it stays the producer's page.
        self.frames = self.frames_address = None
        if self.capacity >= CONTROL_BYTES:
            self.control = mmap.mmap(fd, CONTROL_BYTES, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
            self.frames = _frames_word(self.control)
            self.frames_address = _address_of(self.control) + _FRAMES_AT

    def take(self, offset, nbytes, on_release):
        """A copy of the peer's block, in a numpy array of this process's; `on_release(offset)`
        has run when it returns."""
        import numpy
        if offset < CONTROL_BYTES or nbytes < 0 or offset + nbytes > self.capacity:
            raise ValueError(f"a block of {nbytes} bytes at {offset} is outside the peer's "
                             f"{self.capacity}-byte arena")
        array = numpy.empty(nbytes, dtype=numpy.uint8)
        target, done = memoryview(array), 0
        with self.lock:
            if self.fd is None:
                raise ValueError("the peer's arena is closed: its session ended")
            while done < nbytes:  # a read returns at most 2 GiB
                try:
                    got = os.preadv(self.fd, [target[done:]], offset + done)
                except OSError as error:
                    raise ValueError(f"reading the peer's block at {offset} failed: {error.strerror}") from None
                if got <= 0:
                    raise ValueError(f"the peer's arena ended inside its block at {offset}")
                done += got
        on_release(offset)
        return array

    def close(self):
        """The session ended: the peer's arena is not kept alive from here."""
        with self.lock:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None


_PAGEMAP = None  # this process's /proc/self/pagemap, opened once; False: cannot be read
# A page map entry is 8 little-endian bytes; its last byte holds bit 63 (present, 0x80) and
# bit 61 (file-backed or shared, 0x20). This table marks the last bytes of our own copies.
_OWN_COPY = bytes(1 if byte & 0xA0 == 0x80 else 0 for byte in range(256))


def _copied_pages(address, pages):
    """Whether any of `pages` pages from `address` is this process's own copy (present,
    and neither file-backed nor shared: pagemap bits 63 and 61); None when the kernel
    does not let us read the page map. Each entry's last byte, marked through a table,
    in C: a tensor of a thousand pages is read in microseconds."""
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
    return 1 in data[7::8].translate(_OWN_COPY)
