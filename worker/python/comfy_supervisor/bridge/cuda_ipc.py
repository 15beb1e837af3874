"""CUDA tensors crossing between the host and a pack's worker on the same GPU by CUDA IPC:
the receiver maps the sender's device memory (cuda_driver.py) and no byte goes through
host memory. Where the two sides cannot (no CUDA on one side, another GPU, a sandbox that
keeps the driver's IPC out, memory the driver cannot export), the tensor is staged
through the sender's arena instead (values.py).

That a peer can open our memory is tried, not assumed. At a session's start each side
sends `cuda_hello` with a probe of the device its torch uses, if it uses one: the IPC
handle of a small allocation, kept until the peer answers. The peer opens the probe,
closes it, and answers `cuda_accepts` with the devices whose probe opened. A side sends a
CUDA tensor by IPC only to a peer that accepted the tensor's device. Only a device torch
has already initialised is probed: a CUDA context costs hundreds of MiB on its device.

Lifetimes:
- The sender synchronises the tensor's device, so that the receiver reads finished
  bytes, and keeps the tensor until the peer lets go (release "cuda") or the session ends.
- The worker's tensor lies over the host's memory: no copy. Its mapping closes when the
  tensor is collected. A node that writes into it writes into the host's tensor, as it
  would in one process.
- The host copies what a worker sends once, on the device, and closes the mapping at
  once: ComfyUI caches node outputs beyond a worker's life, and the driver frees a
  process's memory when it exits. A copy on the device costs microseconds where staging
  costs two trips over PCIe and one through host memory.
- A tensor the worker sends back from the host's memory goes back as the host's own
  ("yours_cuda"): memory mapped from another process is not ours to export.
"""

import itertools
import logging
import sys
import threading
import weakref

from .cuda_driver import IPC_HANDLE_BYTES, CudaError, driver
from .values import ValueCrossingError

log = logging.getLogger("comfy_supervisor")
_declined = False  # this process stages every CUDA tensor (a pack worker's --no-cuda-ipc)
_warned = set()    # why CUDA tensors were staged, each said once: a reason holds for every tensor


def _staged(why):
    why = why.splitlines()[0] if why else why  # torch's errors carry its dispatcher's tables after the first line
    if why not in _warned:
        _warned.add(why)
        log.warning("comfy-supervisor: CUDA tensors are staged through host memory: %s", why)


def decline():
    """From now on this process neither lends nor maps CUDA memory: its sessions probe no
    device and accept no probe, so its peers stage CUDA tensors for it too."""
    global _declined
    _declined = True


def usable_devices():
    """{device UUID: torch device index} of the CUDA device this process's torch uses, if
    it initialised one and has not declined; {} otherwise."""
    if _declined:
        return {}
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {}
    index = torch.cuda.current_device()
    try:
        uuids = driver().device_uuids()
    except CudaError as error:
        _staged(str(error))
        return {}
    return {uuids[index]: index} if index < len(uuids) else {}


class _DeviceBytes:
    """Bytes at a device address, as torch.as_tensor takes them without a copy. torch
    holds this object as long as the tensor's storage lives, so its finalizer runs when
    the storage goes."""

    def __init__(self, pointer, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (pointer, False),
                                         "version": 2}


class CudaExchange:
    """One session's CUDA IPC, both ways. `send(message)`: to the peer; `release(lend)`:
    tells the peer we let go of its tensor `lend`; `await_answer()`: waits a while for the
    peer's cuda_accepts (the session reads for it); `copy_received`: copy what the peer
    lends (the host) rather than map it for as long as the tensor lives (a worker)."""

    def __init__(self, send, release, await_answer, copy_received):
        self.send = send
        self.release = release
        self.await_answer = await_answer
        self.copy_received = copy_received
        self.devices = usable_devices()
        self.lock = threading.RLock()  # reentrant: a mapping's finalizer takes it, at any allocation
        self.accepted = set()           # our devices whose memory the peer can open
        self.answered = threading.Event()
        self.probes = []                # our probe tensors, until the peer answered
        self.lent = {}                  # lend id -> our tensor the peer holds
        self.lend_ids = itertools.count(1)
        self.mapped = {}                # the peer's lend id -> (address, bytes) of its tensor we hold
        self.unmapped = []              # [lends still mapped, callback]: when_unmapped's

    # ---- the handshake ----

    def hello(self):
        """Our cuda_hello, with a probe of each of our devices."""
        probes = {}
        torch = sys.modules.get("torch")
        for uuid, index in self.devices.items():
            try:
                probe = torch.empty(1, dtype=torch.uint8, device=torch.device("cuda", index))
                handle, _ = driver().export(index, probe.data_ptr())
            except (CudaError, RuntimeError) as error:
                _staged(f"our device cannot be probed: {error}")
                continue
            self.probes.append(probe)
            probes[uuid] = handle.hex()
        self.send({"op": "cuda_hello", "probes": probes})

    def on_hello(self, message):
        """The peer's probes: the devices whose probe opens here are answered."""
        accepted = []
        probes = message.get("probes")
        for uuid, handle in probes.items() if isinstance(probes, dict) else ():
            index = self.devices.get(uuid)
            if index is None or not isinstance(handle, str):
                continue
            try:
                pointer, _ = driver().open(index, bytes.fromhex(handle))
                driver().close(index, pointer)
            except (CudaError, ValueError) as error:
                _staged(f"the peer's probe does not open here: {error}")
                continue
            accepted.append(uuid)
        self.send({"op": "cuda_accepts", "devices": accepted})

    def on_accepts(self, message):
        devices = message.get("devices")
        with self.lock:
            # Only our own devices' names: anything else the peer lists (a list is not even
            # a key to look up) accepts nothing.
            self.accepted = {uuid for uuid in devices if isinstance(uuid, str) and uuid in self.devices} \
                if isinstance(devices, list) else set()
            self.probes.clear()
        self.answered.set()

    # ---- sending ----

    def share(self, tensor, lent):
        """How a CUDA `tensor` goes by IPC: as the peer's own, or lent by handle (made
        contiguous first; its lend id appended to `lent`); None where it must be staged."""
        nbytes = tensor.numel() * tensor.element_size()
        if tensor.is_contiguous():
            pointer = tensor.data_ptr()
            with self.lock:
                for lend, (address, size) in self.mapped.items():
                    if address <= pointer and pointer + nbytes <= address + size:
                        return {"yours_cuda": lend, "at": pointer - address}
        if not self.devices:
            return None
        if not self.answered.is_set():
            self.await_answer()
        uuid = next((uuid for uuid, index in self.devices.items() if index == tensor.device.index), None)
        if uuid not in self.accepted:
            return None
        tensor = tensor.contiguous()  # only now: a staged tensor is written into the arena as it is
        pointer = tensor.data_ptr()
        torch = sys.modules["torch"]
        torch.cuda.synchronize(tensor.device)
        try:
            handle, at = driver().export(tensor.device.index, pointer)
        except CudaError as error:  # memory the driver cannot export (a virtual-memory pool, say)
            _staged(f"the driver cannot export a tensor's memory: {error}")
            return None
        lend = next(self.lend_ids)
        with self.lock:
            self.lent[lend] = tensor
        lent.append(lend)
        return {"cuda_ipc": {"handle": handle.hex(), "device": uuid, "at": at, "lend": lend}}

    def let_go(self, lends):
        """The peer let go of these tensors of ours, or never got them."""
        with self.lock:
            for lend in lends:
                if type(lend) is int:
                    self.lent.pop(lend, None)

    def take_back(self, tensors):
        """The peer let go of these tensors of ours by other means than a release (a
        mirror's watch closed, cuda_mirror.py): every lend of one of them is ours again."""
        ids = {id(tensor) for tensor in tensors}
        with self.lock:
            for lend in [lend for lend, tensor in self.lent.items() if id(tensor) in ids]:
                del self.lent[lend]

    # ---- receiving ----

    @staticmethod
    def check(spec):
        """A lend's spec as the peer sent it: raises ValueCrossingError unless well formed."""
        if not (isinstance(spec, dict) and isinstance(spec.get("handle"), str) and
                len(spec["handle"]) == 2 * IPC_HANDLE_BYTES and isinstance(spec.get("device"), str) and
                type(spec.get("at")) is int and spec["at"] >= 0 and type(spec.get("lend")) is int):
            raise ValueCrossingError("a CUDA tensor without its handle, device, offset and lend")

    def receive(self, spec, nbytes):
        """A tensor of `nbytes` uint8 over the peer's lend `spec` (check()ed), on our device."""
        lend, index = spec["lend"], self.devices.get(spec["device"])
        if index is None:
            self.release(lend)
            raise ValueCrossingError("a CUDA tensor lent on a device this process does not use")
        try:
            pointer, size = driver().open(index, bytes.fromhex(spec["handle"]))
        except (CudaError, ValueError) as error:
            self.release(lend)
            raise ValueCrossingError(f"a CUDA tensor that cannot be mapped here: {error}") from None
        address = pointer + spec["at"]

        def let_go():
            driver().close(index, pointer)
            with self.lock:
                self.mapped.pop(lend, None)
            self.release(lend)
            self._closed(lend)

        if spec["at"] + nbytes > size:
            let_go()
            raise ValueCrossingError(f"a CUDA tensor of {nbytes} bytes at {spec['at']} of an allocation of {size}")
        torch = sys.modules["torch"]
        device = torch.device("cuda", index)
        mapped = _DeviceBytes(address, nbytes)
        tensor = torch.as_tensor(mapped, device=device)
        if self.copy_received:
            copy = tensor.clone()
            torch.cuda.synchronize(device)  # the copy is done before the mapping goes
            del tensor, mapped
            let_go()
            return copy
        with self.lock:
            self.mapped[lend] = (address, nbytes)
        weakref.finalize(mapped, let_go)
        return tensor

    def lends_at(self, pointers):
        """The lends we mapped at these device addresses (a tensor received whole starts
        where its mapping does)."""
        with self.lock:
            return {lend for lend, (address, _) in self.mapped.items() if address in pointers}

    def when_unmapped(self, lends, callback):
        """Calls `callback()` once none of `lends` is mapped here any more: at once, or as
        the last of them is closed."""
        with self.lock:
            left = {lend for lend in lends if lend in self.mapped}
            if left:
                self.unmapped.append([left, callback])
                return
        callback()

    def _closed(self, lend):
        """`lend`'s mapping is closed: the callbacks that waited for it alone."""
        with self.lock:
            due = []
            for waiting in list(self.unmapped):  # a finalizer meanwhile may add one
                waiting[0].discard(lend)
                if not waiting[0]:
                    due.append(waiting)
            for waiting in due:
                self.unmapped.remove(waiting)
        for _, callback in due:
            callback()

    def own(self, lend, at, nbytes):
        """Bytes of our tensor `lend`, which the peer sent back."""
        with self.lock:
            tensor = self.lent.get(lend)
        size = tensor.numel() * tensor.element_size() if tensor is not None else 0
        if tensor is None or type(at) is not int or at < 0 or at + nbytes > size:
            raise ValueCrossingError(f"a CUDA tensor sent back from one of ours it does not hold "
                                     f"({nbytes} bytes at {at} of lend {lend})")
        return tensor.reshape(-1).view(sys.modules["torch"].uint8)[at:at + nbytes]

    def close(self):
        """The session ended: what the peer held of ours is ours again."""
        with self.lock:
            self.lent.clear()
            self.probes.clear()
        self.answered.set()
