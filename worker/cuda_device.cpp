#include "worker/cuda_device.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace comfy::worker {

namespace {

constexpr const char* kOpenAdvice =
    "check the GPU with nvidia-smi, the NVIDIA driver and CUDA_VISIBLE_DEVICES, or use the simulated device";
constexpr const char* kCheckGpu = "check the GPU with nvidia-smi (and dmesg for Xid errors), then restart the worker";

std::string one_line(std::string text) {
    for (char& c : text) {
        if (c == '\n' || c == '\r') c = ' ';
    }
    return text;
}

// "<error string> (<call>: <error name>)", clearing the (non-sticky) error state so that a
// later cudaGetLastError does not report it again.
std::string cuda_failure(const char* call, cudaError_t error) {
    (void)cudaGetLastError();
    return one_line(std::string(cudaGetErrorString(error)) + " (" + call + ": " + cudaGetErrorName(error) + ")");
}

[[noreturn]] void fail(int index, const std::string& what, const char* call, cudaError_t error, const char* advice) {
    throw std::runtime_error(one_line("CUDA device " + std::to_string(index) + ": " + what + " failed: " +
                                      cuda_failure(call, error) + "; " + advice));
}

std::string version_text(int version) { return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10); }

// cudaErrorInsufficientDriver says "driver version is insufficient" even when there is no
// driver at all: say which it is.
std::string driver_problem() {
    (void)cudaGetLastError();
    int driver = 0;
    int runtime = 0;
    (void)cudaDriverGetVersion(&driver);
    (void)cudaRuntimeGetVersion(&runtime);
    (void)cudaGetLastError();
    if (driver == 0) return "no NVIDIA driver is installed";
    return "the NVIDIA driver supports CUDA up to " + version_text(driver) + " but this build's CUDA runtime is " +
           version_text(runtime);
}

std::string pointer_text(const void* ptr) {
    char text[32];
    std::snprintf(text, sizeof text, "%p", ptr);
    return text;
}

std::uint64_t sum(const auto& blocks) {
    std::uint64_t total = 0;
    for (const auto& block : blocks) total += block.bytes;
    return total;
}

}  // namespace

CudaDevice::CudaDevice(int index) : index_(index) {
    if (const auto problem = probe(index)) throw std::runtime_error(*problem + "; " + kOpenAdvice);
}

CudaDevice::~CudaDevice() {
    // Errors are ignored: at process exit the runtime may already be unloading.
    (void)cudaSetDevice(index_);
    for (auto it = registered_.rbegin(); it != registered_.rend(); ++it) (void)cudaHostUnregister(it->ptr);
    for (auto it = pinned_.rbegin(); it != pinned_.rend(); ++it) (void)cudaFreeHost(it->ptr);
    for (auto it = allocations_.rbegin(); it != allocations_.rend(); ++it) (void)cudaFree(it->ptr);
    (void)cudaGetLastError();
}

std::optional<std::string> CudaDevice::probe(int index) {
    const std::string prefix = "CUDA device " + std::to_string(index) + " is not usable: ";
    if (index < 0) return prefix + "a CUDA device index is 0 or more";
    int count = 0;
    if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
        if (error == cudaErrorInsufficientDriver) return prefix + driver_problem() + " (cudaGetDeviceCount: " + cudaGetErrorName(error) + ")";
        return prefix + cuda_failure("cudaGetDeviceCount", error);
    }
    std::string visible;
    if (const char* env = std::getenv("CUDA_VISIBLE_DEVICES")) visible = std::string(" with CUDA_VISIBLE_DEVICES=\"") + env + "\"";
    if (count <= 0) return one_line(prefix + "no CUDA-capable device is present" + visible);
    if (index >= count) {
        return one_line(prefix + "this process sees " + std::to_string(count) + " CUDA device(s), numbered 0 to " +
                        std::to_string(count - 1) + visible);
    }
    if (const cudaError_t error = cudaSetDevice(index); error != cudaSuccess) {
        return prefix + cuda_failure("cudaSetDevice", error);
    }
    // Creates the primary context if cudaSetDevice did not: a device in prohibited or
    // exclusive-process mode held by another process fails here.
    if (const cudaError_t error = cudaFree(nullptr); error != cudaSuccess) {
        return prefix + cuda_failure("cudaFree(nullptr) creating the context", error);
    }
    return std::nullopt;
}

void CudaDevice::select() const {
    if (const cudaError_t error = cudaSetDevice(index_); error != cudaSuccess) {
        fail(index_, "making the device current", "cudaSetDevice", error, kCheckGpu);
    }
}

std::uint64_t CudaDevice::total_bytes() const {
    select();
    std::size_t free = 0;
    std::size_t total = 0;
    if (const cudaError_t error = cudaMemGetInfo(&free, &total); error != cudaSuccess) {
        fail(index_, "reading its memory size", "cudaMemGetInfo", error, kCheckGpu);
    }
    return total;
}

std::uint64_t CudaDevice::free_bytes() const {
    select();
    std::size_t free = 0;
    std::size_t total = 0;
    if (const cudaError_t error = cudaMemGetInfo(&free, &total); error != cudaSuccess) {
        fail(index_, "reading its free memory", "cudaMemGetInfo", error, kCheckGpu);
    }
    return free;
}

bool CudaDevice::allocate(std::uint64_t bytes) {
    if (bytes == 0) return true;
    select();
    void* ptr = nullptr;
    const cudaError_t error = cudaMalloc(&ptr, static_cast<std::size_t>(bytes));
    if (error == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return false;
    }
    if (error != cudaSuccess) fail(index_, "allocating " + std::to_string(bytes) + " bytes", "cudaMalloc", error, kCheckGpu);
    try {
        allocations_.push_back({ptr, bytes});
    } catch (...) {
        (void)cudaFree(ptr);
        throw;
    }
    return true;
}

void CudaDevice::release(std::uint64_t bytes) {
    std::uint64_t freed = 0;
    while (freed < bytes && !allocations_.empty()) {
        select();
        const Block block = allocations_.back();
        if (const cudaError_t error = cudaFree(block.ptr); error != cudaSuccess) {
            fail(index_, "freeing " + std::to_string(block.bytes) + " bytes", "cudaFree", error, kCheckGpu);
        }
        allocations_.pop_back();
        freed += block.bytes;
    }
}

bool CudaDevice::pin_host(std::uint64_t bytes) {
    if (bytes == 0) return true;
    select();
    void* ptr = nullptr;
    const cudaError_t error = cudaHostAlloc(&ptr, static_cast<std::size_t>(bytes), cudaHostAllocPortable);
    if (error == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return false;
    }
    if (error != cudaSuccess) {
        fail(index_, "pinning " + std::to_string(bytes) + " bytes of host memory", "cudaHostAlloc", error, kCheckGpu);
    }
    try {
        pinned_.push_back({ptr, bytes});
    } catch (...) {
        (void)cudaFreeHost(ptr);
        throw;
    }
    return true;
}

void CudaDevice::unpin_host(std::uint64_t bytes) {
    std::uint64_t freed = 0;
    while (freed < bytes && !pinned_.empty()) {
        select();
        const Block block = pinned_.back();
        if (const cudaError_t error = cudaFreeHost(block.ptr); error != cudaSuccess) {
            fail(index_, "freeing " + std::to_string(block.bytes) + " bytes of pinned host memory", "cudaFreeHost",
                 error, kCheckGpu);
        }
        pinned_.pop_back();
        freed += block.bytes;
    }
}

std::uint64_t CudaDevice::used_by_this_process() const { return sum(allocations_); }

std::uint64_t CudaDevice::pinned_by_this_process() const { return sum(pinned_) + sum(registered_); }

bool CudaDevice::register_host(void* ptr, std::size_t bytes) {
    select();
    const cudaError_t error = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable);
    if (error == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return false;
    }
    if (error != cudaSuccess) {
        fail(index_, "registering " + std::to_string(bytes) + " bytes of host memory at " + pointer_text(ptr),
             "cudaHostRegister", error, "pass host memory the caller owns that is not already registered");
    }
    try {
        registered_.push_back({ptr, bytes});
    } catch (...) {
        (void)cudaHostUnregister(ptr);
        throw;
    }
    return true;
}

void CudaDevice::unregister_host(void* ptr) {
    auto it = registered_.begin();
    while (it != registered_.end() && it->ptr != ptr) ++it;
    if (it == registered_.end()) {
        throw std::runtime_error("CUDA device " + std::to_string(index_) + ": unregistering host memory at " +
                                 pointer_text(ptr) +
                                 " failed: it was not registered through this device; pass the pointer given to "
                                 "register_host");
    }
    select();
    if (const cudaError_t error = cudaHostUnregister(ptr); error != cudaSuccess) {
        fail(index_, "unregistering host memory at " + pointer_text(ptr), "cudaHostUnregister", error, kCheckGpu);
    }
    registered_.erase(it);
}

void CudaDevice::synchronize() {
    select();
    if (const cudaError_t error = cudaDeviceSynchronize(); error != cudaSuccess) {
        fail(index_, "waiting for its work", "cudaDeviceSynchronize", error, kCheckGpu);
    }
}

}  // namespace comfy::worker
