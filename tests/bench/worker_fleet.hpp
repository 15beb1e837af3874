#pragma once
// What the benchmarks that run many comfy-worker processes under the real supervisor
// share: their config, the descriptors the supervisor needs for them, and the loop
// thread's CPU clock.

#include "supervisor/config/config.hpp"

#include <cstdint>
#include <filesystem>
#include <string>

namespace comfy::bench {

// The loop thread's CPU time so far, in microseconds (the workers' own CPU is not in it).
double thread_cpu_us();

// The supervisor holds several descriptors per worker (its pidfd, its doorbell, its
// output): makes sure a 1,024 soft limit does not stop it at `workers` workers.
void raise_open_files(std::uint32_t workers);

// `workers` packs named w1, w2, ... of comfy-worker (`worker`) running the pack file `pack`
// on the simulated device, with participants sized as a user would size them.
supervisor::Config fleet_config(const std::filesystem::path& worker, const std::filesystem::path& pack,
                                std::uint32_t workers);

// A folder of its own under the temporary directory, holding one pack file; removed with it.
class PackFolder {
public:
    // `name` says whose (it is made unique per process); `pack_json` is the pack file's text.
    PackFolder(const std::string& name, const std::string& pack_json);
    ~PackFolder();
    PackFolder(const PackFolder&) = delete;
    PackFolder& operator=(const PackFolder&) = delete;

    std::filesystem::path pack() const { return folder_ / "pack.json"; }

private:
    std::filesystem::path folder_;
};

}  // namespace comfy::bench
