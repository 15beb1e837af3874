"""The CUDA driver's inter-process memory calls, for CUDA tensors that cross between the
host and a pack's worker on the same GPU (cuda_ipc.py).

Bound with ctypes against libcuda.so.1, the driver itself. torch's own sharing
(torch.multiprocessing's _share_cuda_) does not fit: it hands the receiver the name of a
shared-memory file to open for its reference counts, and the host must open nothing a
worker names. The runtime API does not fit either: it comes in as many copies as there are
torch wheels, where the driver is one library that every CUDA process has loaded.

Driver device ordinals are torch's device indexes: both number the devices that
CUDA_VISIBLE_DEVICES leaves. Every call that needs a context runs in the device's primary
context, the one torch uses, pushed for the call and popped after (a finalizer or a
reader thread has none current). A failure raises CudaError with one line: the call, the
driver's error name and its text.
"""

import contextlib
import ctypes
import threading

IPC_HANDLE_BYTES = 64
UUID_BYTES = 16
_SUCCESS = 0
_LAZY_ENABLE_PEER_ACCESS = 1  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS: the only flag the call takes
_LIBRARY = "libcuda.so.1"


class CudaError(RuntimeError):
    """A driver call failed, or there is no usable driver; the message is one line."""


class _IpcMemHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * IPC_HANDLE_BYTES)]


class _Uuid(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_ubyte * UUID_BYTES)]


_POINTER = ctypes.c_uint64  # CUdeviceptr
_SIGNATURES = {
    "cuInit": (ctypes.c_uint,),
    "cuGetErrorName": (ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)),
    "cuGetErrorString": (ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)),
    "cuDeviceGetCount": (ctypes.POINTER(ctypes.c_int),),
    "cuDeviceGet": (ctypes.POINTER(ctypes.c_int), ctypes.c_int),
    "cuDeviceGetUuid": (ctypes.POINTER(_Uuid), ctypes.c_int),
    "cuDevicePrimaryCtxRetain": (ctypes.POINTER(ctypes.c_void_p), ctypes.c_int),
    "cuCtxPushCurrent_v2": (ctypes.c_void_p,),
    "cuCtxPopCurrent_v2": (ctypes.POINTER(ctypes.c_void_p),),
    "cuMemGetAddressRange_v2": (ctypes.POINTER(_POINTER), ctypes.POINTER(ctypes.c_size_t), _POINTER),
    "cuIpcGetMemHandle": (ctypes.POINTER(_IpcMemHandle), _POINTER),
    "cuIpcOpenMemHandle_v2": (ctypes.POINTER(_POINTER), _IpcMemHandle, ctypes.c_uint),
    "cuIpcCloseMemHandle": (_POINTER,),
}


class Driver:
    """The driver, initialised, with the primary context of each device used so far."""

    def __init__(self, library=_LIBRARY):
        try:
            lib = ctypes.CDLL(library)
        except OSError as error:
            raise CudaError(f"no CUDA driver ({error})") from None
        self.calls = {}
        for name, argtypes in _SIGNATURES.items():
            # A MIG instance's own UUID where the driver has the call (CUDA 11.4), not its GPU's.
            function = getattr(lib, name + "_v2", None) if name == "cuDeviceGetUuid" else None
            function = function or getattr(lib, name, None)
            if function is None:
                raise CudaError(f"the CUDA driver {library} has no {name}: it is older than CUDA 11")
            function.argtypes, function.restype = argtypes, ctypes.c_int
            self.calls[name] = function
        self.contexts = {}  # ordinal -> its primary context, retained for the process's life
        self.lock = threading.Lock()
        self.call("cuInit", 0)

    def call(self, name, *args):
        result = self.calls[name](*args)
        if result != _SUCCESS:
            raise CudaError(f"{name} failed: {self.error_text(result)}")

    def error_text(self, result):
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        if self.calls["cuGetErrorName"](result, ctypes.byref(name)) != _SUCCESS or name.value is None:
            return f"CUDA error {result}"
        self.calls["cuGetErrorString"](result, ctypes.byref(text))
        return f"{name.value.decode()} ({(text.value or b'').decode()})"

    def device_uuids(self):
        """The UUID (hex) of each device this process sees, by ordinal."""
        count = ctypes.c_int()
        self.call("cuDeviceGetCount", ctypes.byref(count))
        uuids = []
        for ordinal in range(count.value):
            device, uuid = ctypes.c_int(), _Uuid()
            self.call("cuDeviceGet", ctypes.byref(device), ordinal)
            self.call("cuDeviceGetUuid", ctypes.byref(uuid), device)
            uuids.append(bytes(uuid.bytes).hex())
        return uuids

    @contextlib.contextmanager
    def on_device(self, ordinal):
        """The device's primary context is current for the block."""
        with self.lock:
            context = self.contexts.get(ordinal)
            if context is None:
                device, context = ctypes.c_int(), ctypes.c_void_p()
                self.call("cuDeviceGet", ctypes.byref(device), ordinal)
                self.call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
                self.contexts[ordinal] = context
        self.call("cuCtxPushCurrent_v2", context)
        try:
            yield
        finally:
            self.call("cuCtxPopCurrent_v2", ctypes.byref(ctypes.c_void_p()))

    def export(self, ordinal, pointer):
        """(the IPC handle of the allocation holding `pointer`, `pointer`'s offset in it):
        torch's caching allocator hands out parts of larger allocations, and a handle
        names a whole one."""
        base, size, handle = _POINTER(), ctypes.c_size_t(), _IpcMemHandle()
        with self.on_device(ordinal):
            self.call("cuMemGetAddressRange_v2", ctypes.byref(base), ctypes.byref(size), _POINTER(pointer))
            self.call("cuIpcGetMemHandle", ctypes.byref(handle), base)
        return bytes(handle.reserved), pointer - base.value

    def open(self, ordinal, handle):
        """(the address of another process's allocation, mapped here, its size). The driver
        counts opens of one handle: each needs its close()."""
        if len(handle) != IPC_HANDLE_BYTES:
            raise CudaError(f"an IPC handle of {len(handle)} bytes, not {IPC_HANDLE_BYTES}")
        pointer, base, size = _POINTER(), _POINTER(), ctypes.c_size_t()
        with self.on_device(ordinal):
            self.call("cuIpcOpenMemHandle_v2", ctypes.byref(pointer), _IpcMemHandle.from_buffer_copy(handle),
                      _LAZY_ENABLE_PEER_ACCESS)
            try:
                self.call("cuMemGetAddressRange_v2", ctypes.byref(base), ctypes.byref(size), pointer)
            except CudaError:
                self.call("cuIpcCloseMemHandle", pointer)
                raise
        return pointer.value, size.value

    def close(self, ordinal, pointer):
        with self.on_device(ordinal):
            self.call("cuIpcCloseMemHandle", _POINTER(pointer))


_driver = None
_driver_error = None
_driver_lock = threading.Lock()


def driver():
    """The process's Driver; CudaError, the same each time, where there is none."""
    global _driver, _driver_error
    with _driver_lock:
        if _driver is None and _driver_error is None:
            try:
                _driver = Driver()
            except CudaError as error:
                _driver_error = error
        if _driver_error is not None:
            raise _driver_error
        return _driver
