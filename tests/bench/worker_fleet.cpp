#include "tests/bench/worker_fleet.hpp"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace comfy::bench {

namespace {
// Descriptors the supervisor may hold per worker, with room to spare.
constexpr rlim_t kDescriptorsPerWorker = 8;
}  // namespace

double thread_cpu_us() {
    timespec now{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
    return static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
}

void raise_open_files(std::uint32_t workers) {
    const rlim_t needed = workers * kDescriptorsPerWorker + 64;
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= needed) return;
    limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, needed);
    ::setrlimit(RLIMIT_NOFILE, &limit);
}

supervisor::Config fleet_config(const std::filesystem::path& worker, const std::filesystem::path& pack,
                                std::uint32_t workers) {
    supervisor::Config config;
    config.source = "bench";
    config.device.kind = supervisor::DeviceKind::simulated;  // the default is the machine's GPU
    // Sized as a user would size it: the default 64 participants, or the pack count plus
    // the host's slot when that is more.
    config.limits.capacities.participants = std::max<std::uint32_t>(config.limits.capacities.participants, workers + 1);
    // A thousand processes starting on a small machine may take longer than the defaults
    // allow before Hello; a worker killed for it would restart and count twice.
    config.limits.handshake_timeout = std::chrono::minutes(2);
    for (std::uint32_t i = 0; i < workers; ++i) {
        supervisor::PackConfig p;
        // Appended: `"w" + std::string` makes GCC 12 at -O3 warn (-Wrestrict, a false
        // positive inside std::string's insert), an error with -Werror.
        p.name = std::string("w").append(std::to_string(i + 1));
        p.command = worker.string();
        p.args = {"--pack", pack.string()};
        p.working_directory = pack.parent_path().string();
        config.packs.push_back(std::move(p));
    }
    return config;
}

PackFolder::PackFolder(const std::string& name, const std::string& pack_json)
    : folder_(std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(folder_);
    std::ofstream(pack()) << pack_json;
}

PackFolder::~PackFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(folder_, ignored);
}

}  // namespace comfy::bench
