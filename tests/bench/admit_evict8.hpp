#pragma once
// admit_evict8_us: one admission that needs eight evictions, end to end through the real
// supervisor loop and real comfy-worker processes on the simulated device.

#include <filesystem>
#include <vector>

namespace comfy::bench {

// Microseconds from the supervisor taking the asker's admission request off its ring to
// the grant going back, one sample per cycle. `worker` is the comfy-worker binary.
std::vector<double> measure_admit_evict8(const std::filesystem::path& worker, int cycles);

}  // namespace comfy::bench
