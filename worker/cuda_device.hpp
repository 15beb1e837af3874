#pragma once
// The CUDA device backend, over the CUDA runtime API. Built only where the CUDA toolkit
// was found at build time (COMFY_HAVE_CUDA is then defined); elsewhere use
// worker/device_factory.hpp, which answers whether CUDA can be used and why not.
//
// No CUDA header is included here: the runtime API stays inside cuda_device.cpp.
//
// Allocation rule: device memory and pinned host memory are kept as lists of whole
// allocations (one cudaMalloc / cudaHostAlloc per allocate / pin_host call). release(n)
// and unpin_host(n) free whole allocations, most recent first, until at least n bytes
// have been freed or the list is empty; so they may free more than n (never part of an
// allocation), and release(0) frees nothing.
//
// Errors: every CUDA failure other than "out of memory" from allocate / pin_host /
// register_host throws std::runtime_error whose what() is one line: what failed, the
// CUDA error string and name, and what to do.
//
// Not thread-safe: one thread at a time, like the simulated device. Every call first
// makes this device current on the calling thread (cudaSetDevice).

#include "worker/device.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace comfy::worker {

class CudaDevice final : public Device {
public:
    // Opens CUDA device `index` (creating its primary context). Throws std::runtime_error,
    // one line containing probe(index)'s reason, when the device cannot be used.
    explicit CudaDevice(int index);
    // Frees every allocation and pinned block and unregisters every registered range;
    // errors are ignored (the process may be exiting).
    ~CudaDevice() override;
    CudaDevice(const CudaDevice&) = delete;
    CudaDevice& operator=(const CudaDevice&) = delete;

    // nullopt when device `index` is present and a context can be created on it; otherwise
    // one line: "CUDA device N is not usable: <why> (<call>: <cudaError name>)". When usable,
    // device `index` is left current on the calling thread with its primary context made.
    static std::optional<std::string> probe(int index);

    int index() const { return index_; }

    // From cudaMemGetInfo: free is device-wide, other processes' use included.
    std::uint64_t total_bytes() const override;
    std::uint64_t free_bytes() const override;
    // One cudaMalloc; false (error cleared) on cudaErrorMemoryAllocation. allocate(0) is true
    // and records nothing.
    bool allocate(std::uint64_t bytes) override;
    // Frees whole allocations, most recent first, until at least `bytes` are freed.
    void release(std::uint64_t bytes) override;
    // One cudaHostAlloc(cudaHostAllocPortable); false (error cleared) when it cannot pin.
    bool pin_host(std::uint64_t bytes) override;
    // Frees whole pinned blocks from pin_host, most recent first, until at least `bytes`
    // are freed. Ranges from register_host are not touched: use unregister_host.
    void unpin_host(std::uint64_t bytes) override;
    // Sum of the live allocations.
    std::uint64_t used_by_this_process() const override;
    // Sum of the live pin_host blocks plus the registered ranges.
    std::uint64_t pinned_by_this_process() const override;

    // Page-locks memory the caller owns (cudaHostRegister, portable). False (error cleared)
    // when the pages cannot be locked; throws on misuse (e.g. a range already registered).
    bool register_host(void* ptr, std::size_t bytes);
    // Undoes register_host(ptr). Throws when ptr was not registered through this device.
    void unregister_host(void* ptr);
    // Waits for all work on the device (cudaDeviceSynchronize).
    void synchronize();

private:
    struct Block {
        void* ptr;
        std::uint64_t bytes;
    };

    void select() const;

    int index_;
    std::vector<Block> allocations_;
    std::vector<Block> pinned_;
    std::vector<Block> registered_;
};

}  // namespace comfy::worker
