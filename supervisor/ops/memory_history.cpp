#include "supervisor/ops/memory_history.hpp"

namespace comfy::supervisor {

MemorySample memory_sample(std::uint32_t device, Bytes total, Bytes free, Bytes reserve,
                           const std::vector<CensusRow>& census) {
    MemorySample sample{std::chrono::system_clock::now(), device, total, free, reserve, {}};
    sample.participants.reserve(census.size());
    for (const auto& row : census) {
        sample.participants.push_back({row.pack, row.census.device_used_bytes, row.census.pinned_bytes});
    }
    return sample;
}

void MemoryHistory::add(MemorySample sample) {
    if (capacity_ == 0) return;
    if (samples_.size() == capacity_) samples_.pop_front();
    samples_.push_back(std::move(sample));
}

nlohmann::json MemoryHistory::to_json(std::chrono::milliseconds interval) const {
    nlohmann::json samples = nlohmann::json::array();
    for (const auto& s : samples_) {
        nlohmann::json participants = nlohmann::json::array();
        for (const auto& p : s.participants) {
            participants.push_back({{"name", p.pack}, {"device_bytes", p.device}, {"pinned_bytes", p.pinned}});
        }
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(s.at.time_since_epoch()).count();
        samples.push_back({{"time_ms", ms},
                           {"devices",
                            {{{"device", s.device},
                              {"total_bytes", s.device_total},
                              {"free_bytes", s.device_free},
                              {"reserve_bytes", s.device_reserve}}}},
                           {"participants", std::move(participants)}});
    }
    return {{"version", 1}, {"interval_ms", interval.count()}, {"capacity", capacity_}, {"samples", std::move(samples)}};
}

HistorySampler::HistorySampler(boost::asio::io_context& io, std::function<MemorySample()> take,
                               std::chrono::milliseconds interval)
    : timer_(io), take_(std::move(take)), interval_(interval) {}

void HistorySampler::start() { sample(); }

void HistorySampler::stop() { timer_.cancel(); }

void HistorySampler::sample() {
    history_.add(take_());
    timer_.expires_after(interval_);
    timer_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec) sample();
    });
}

}  // namespace comfy::supervisor
