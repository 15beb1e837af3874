#pragma once
// A short history of memory for GET /memory-history and the dashboard: every few seconds, the
// supervised device's total, free and reserve, and what each participant holds on it and
// pins in host RAM. The last `capacity` samples are kept (10 minutes at the default
// interval), so the memory it takes is bounded by the participants configured. Lives on
// the supervisor's event loop: no locking.

#include "shared/memory_arithmetic.hpp"
#include "supervisor/ops/supervised.hpp"

#include <nlohmann/json.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace comfy::supervisor {

struct MemorySample {
    std::chrono::system_clock::time_point at;
    std::uint32_t device = 0;  // the supervised device's index
    Bytes device_total = 0;
    Bytes device_free = 0;
    Bytes device_reserve = 0;
    struct Holding {
        std::string pack;
        Bytes device = 0;  // device bytes in use, from its census
        Bytes pinned = 0;  // host bytes pinned, from its census
    };
    std::vector<Holding> participants;
};

// A sample of the device figures given and what each census row holds.
MemorySample memory_sample(std::uint32_t device, Bytes total, Bytes free, Bytes reserve,
                           const std::vector<CensusRow>& census);

class MemoryHistory {
public:
    static constexpr std::chrono::milliseconds kDefaultInterval{2000};
    static constexpr std::size_t kDefaultCapacity = 300;  // 10 minutes at 2 s

    explicit MemoryHistory(std::size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

    void add(MemorySample sample);
    const std::deque<MemorySample>& samples() const noexcept { return samples_; }

    // {"version", "interval_ms", "capacity", "samples": [{"time_ms", "devices": [{"device",
    // "total_bytes", "free_bytes", "reserve_bytes"}], "participants": [{"name",
    // "device_bytes", "pinned_bytes"}]}]}, oldest first (docs/METRICS.md).
    nlohmann::json to_json(std::chrono::milliseconds interval) const;

private:
    std::size_t capacity_;
    std::deque<MemorySample> samples_;
};

// Takes a sample every `interval` on the event loop, from `take`, into a MemoryHistory.
class HistorySampler {
public:
    HistorySampler(boost::asio::io_context& io, std::function<MemorySample()> take,
                   std::chrono::milliseconds interval = MemoryHistory::kDefaultInterval);

    // Takes the first sample now, then one every interval until stop().
    void start();
    void stop();
    std::string json() const { return history_.to_json(interval_).dump() + "\n"; }

private:
    void sample();

    boost::asio::steady_timer timer_;
    std::function<MemorySample()> take_;
    std::chrono::milliseconds interval_;
    MemoryHistory history_;
};

}  // namespace comfy::supervisor
