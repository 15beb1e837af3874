#include "tests/bench/echo_workers.hpp"

#include "supervisor/supervisor.hpp"
#include "tests/bench/forked_measurement.hpp"
#include "tests/bench/worker_fleet.hpp"

#include <boost/asio/steady_timer.hpp>

#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace comfy::bench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int kWarmUp = 500;
constexpr int kTimed = 20'000;          // echoes of one prompt
constexpr int kTimedNewPrompts = 500;   // echoes that each start a new prompt
// From every worker ready to the first echo: what the spawns left (children's output,
// their first heartbeats) is done by then, and only the loop's ticks remain beside the echoes.
constexpr auto kSettle = std::chrono::seconds(2);

// The echo loop: each echo goes out when the last one's result is in.
class Echoes {
public:
    explicit Echoes(supervisor::Supervisor& supervisor) : supervisor_(supervisor), settle_(supervisor.io()) {}

    EchoFigures run() {
        supervisor_.on_all_started([this] {
            settle_.expires_after(kSettle);
            settle_.async_wait([this](const boost::system::error_code& ec) {
                if (!ec) next();
            });
        });
        supervisor_.run();
        if (!failure_.empty()) throw std::runtime_error(failure_);
        if (rtt_us_.size() != kTimed) throw std::runtime_error("echo: the run ended early");
        std::sort(rtt_us_.begin(), rtt_us_.end());
        const auto at = [&](double q) {
            return rtt_us_[static_cast<std::size_t>(q * static_cast<double>(rtt_us_.size() - 1))];
        };
        return {at(0.50), at(0.99), (same_prompt_end_ - same_prompt_start_) / kTimed,
                (new_prompts_end_ - same_prompt_end_) / kTimedNewPrompts};
    }

private:
    void next() {
        if (sent_ == kWarmUp) same_prompt_start_ = thread_cpu_us();
        if (sent_ == kWarmUp + kTimed) same_prompt_end_ = thread_cpu_us();
        if (sent_ == kWarmUp + kTimed + kTimedNewPrompts) {
            new_prompts_end_ = thread_cpu_us();
            supervisor_.begin_shutdown("benchmark done");
            return;
        }
        // The warm-up and timed echoes share prompt 1; each of the last ones is a new prompt.
        const std::uint64_t epoch = sent_ < kWarmUp + kTimed ? 1 : 2 + static_cast<std::uint64_t>(sent_);
        const auto sent_at = Clock::now();
        const bool timed = sent_ >= kWarmUp && sent_ < kWarmUp + kTimed;
        ++sent_;
        supervisor_.submit("w1", "noop", epoch, static_cast<std::uint32_t>(sent_), [this, sent_at, timed](const Message& reply) {
            if (reply.type() != MessageType::work_result) {
                failure_ = "echo: the node was answered with " + std::string(to_string(reply.type()));
                supervisor_.begin_shutdown("benchmark failed");
                return;
            }
            if (timed) rtt_us_.push_back(std::chrono::duration<double, std::micro>(Clock::now() - sent_at).count());
            next();
        });
    }

    supervisor::Supervisor& supervisor_;
    boost::asio::steady_timer settle_;
    int sent_ = 0;
    std::vector<double> rtt_us_;
    double same_prompt_start_ = 0;
    double same_prompt_end_ = 0;
    double new_prompts_end_ = 0;
    std::string failure_;
};

EchoFigures measure(const std::filesystem::path& worker, std::uint32_t workers) {
    raise_open_files(workers);
    const PackFolder folder("comfy-bench-echo-" + std::to_string(workers),
                            R"({"nodes": {"noop": [{"op": "compute", "ms": 0}]}})");
    supervisor::Supervisor supervisor(fleet_config(worker, folder.pack(), workers),
                                      "bench-echo-" + std::to_string(::getpid()) + "-" + std::to_string(workers));
    const EchoFigures figures = Echoes(supervisor).run();
    const supervisor::Totals totals = supervisor.totals();
    if (totals.workers_started != workers || totals.workers_restarted != 0) {
        throw std::runtime_error("echo: " + std::to_string(totals.workers_restarted) + " restarts among " +
                                 std::to_string(workers) + " workers; every worker must start once");
    }
    return figures;
}

}  // namespace

EchoFigures echo_with_idle_workers(const std::filesystem::path& worker, std::uint32_t workers) {
    return measured_in_child<EchoFigures>("echo with " + std::to_string(workers) + " workers",
                                          [&] { return measure(worker, workers); });
}

}  // namespace comfy::bench
