"""CudaExchange's books (comfy_supervisor.bridge.cuda_ipc) on a machine without a GPU: which
lends each side keeps, what a tensor sent back becomes, when a mapping is closed and the peer
told, and what a lend too large for its allocation gets. No CUDA runs here: the driver is
a stand-in that "exports" a CPU tensor's address and "maps" it back in this same process,
and torch's CUDA calls the exchange makes are replaced for the run, so the exchange's own
logic runs on CPU memory. The real crossing, between two processes on a GPU, is
scripts/gpu-check's (tests/host/cuda_values_check.py).

Prints one line per check and "cuda-exchange: N passed, M failed"; exit status 1 on any failure."""

import ctypes
import gc
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "worker", "python"))

import numpy  # noqa: E402
import torch  # noqa: E402
from check_report import CheckReport  # noqa: E402
from comfy_supervisor.bridge import cuda_driver, cuda_ipc, values  # noqa: E402

DEVICE = "ab" * 16


class StandInDriver:
    """Exports an address as its handle; maps a handle back to the same address."""

    def __init__(self):
        self.sizes, self.closed = {}, []

    def device_uuids(self):
        return [DEVICE]

    def export(self, ordinal, pointer):
        return pointer.to_bytes(8, "little") * 8, 0

    def open(self, ordinal, handle):
        pointer = int.from_bytes(handle[:8], "little")
        return pointer, self.sizes[pointer]

    def close(self, ordinal, pointer):
        self.closed.append(pointer)


def over_address(interface, device=None):
    """torch.as_tensor over a __cuda_array_interface__, on the CPU: the tensor keeps the
    interface object as long as its storage lives, as torch's does."""
    spec = interface.__cuda_array_interface__
    buffer = (ctypes.c_uint8 * spec["shape"][0]).from_address(spec["data"][0])
    buffer.keep = interface
    return torch.from_numpy(numpy.ctypeslib.as_array(buffer))


class OnDevice:
    """A CPU tensor as share() sees a CUDA one: its address, size and device index."""

    class device:
        type, index = "cuda", 0

    def __init__(self, tensor):
        self.tensor = tensor

    def data_ptr(self):
        return self.tensor.data_ptr()

    def numel(self):
        return self.tensor.numel()

    def element_size(self):
        return self.tensor.element_size()

    def reshape(self, *shape):
        return self.tensor.reshape(*shape)

    def is_contiguous(self):
        return self.tensor.is_contiguous()

    def contiguous(self):
        return self if self.tensor.is_contiguous() else OnDevice(self.tensor.contiguous())


def main():
    driver = StandInDriver()
    cuda_driver._driver = driver
    torch.cuda.is_available = torch.cuda.is_initialized = lambda: True
    torch.cuda.current_device = lambda: 0
    torch.cuda.synchronize = lambda device=None: None
    torch.as_tensor = over_address
    report = CheckReport("cuda-exchange")
    check = report.check

    to_host, to_worker = [], []
    host = cuda_ipc.CudaExchange(lambda m: None, to_worker.append, lambda: None, copy_received=True)
    worker = cuda_ipc.CudaExchange(lambda m: None, to_host.append, lambda: None, copy_received=False)
    for side in (host, worker):
        side.on_accepts({"devices": [DEVICE]})

    image = torch.arange(16, dtype=torch.float32)
    driver.sizes[image.data_ptr()] = 64
    lent = []
    spec = host.share(OnDevice(image), lent)["cuda_ipc"]
    check(lent == [spec["lend"]] and spec["lend"] in host.lent, f"the host lends its tensor by handle: {lent}")
    values.Decoder(None, None, None, cuda=worker).check_tensor(
        {"$": "tensor", "dtype": "float32", "shape": [16], "nbytes": 64, "cuda_ipc": spec})
    received = worker.receive(spec, 64).view(torch.float32)
    check(torch.equal(received, image) and received.data_ptr() == image.data_ptr(),
          "the worker's tensor lies over the host's memory, bit-exact")
    back = worker.share(OnDevice(received[4:8]), [])
    check(back == {"yours_cuda": spec["lend"], "at": 16}, f"a part of it goes back as the host's own: {back}")
    own = host.own(back["yours_cuda"], back["at"], 16).view(torch.float32)
    check(own.data_ptr() == image.data_ptr() + 16 and own.tolist() == [4.0, 5.0, 6.0, 7.0],
          "the host gets a view of its own tensor")
    del received, own
    gc.collect()
    check(driver.closed == [image.data_ptr()] and to_host == [spec["lend"]] and not worker.mapped,
          f"the worker's mapping closes when its tensor goes, and the host is told: {to_host}")
    host.let_go(to_host)
    check(not host.lent, "the host lends nothing once told")

    made = torch.full((8,), 7, dtype=torch.int64)
    driver.sizes[made.data_ptr()] = 64
    spec = worker.share(OnDevice(made), [])["cuda_ipc"]
    copy = host.receive(spec, 64).view(torch.int64)
    check(torch.equal(copy, made) and copy.data_ptr() != made.data_ptr() and to_worker == [spec["lend"]],
          "the host copies the worker's tensor and lets go of it at once")
    worker.let_go(to_worker)
    check(not worker.lent, "the worker lends nothing once told")

    driver.sizes[made.data_ptr()] = 32
    spec = worker.share(OnDevice(made), [])["cuda_ipc"]
    try:
        host.receive(spec, 64)
        refused = None
    except values.ValueCrossingError as error:
        refused = str(error)
    check(refused and to_worker[-1] == spec["lend"], f"a lend larger than its allocation is refused and released: {refused}")
    try:
        host.own(99, 0, 4)
        refused = None
    except values.ValueCrossingError as error:
        refused = str(error)
    check(refused is not None, f"a tensor sent back from a lend never made is refused: {refused}")

    return report.finish()


if __name__ == "__main__":
    sys.exit(main())
