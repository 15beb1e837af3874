#include "tests/bench/admit_evict8.hpp"

#include "supervisor/supervisor.hpp"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <stdexcept>
#include <string>

namespace comfy::bench {

namespace {

using Clock = std::chrono::steady_clock;
using supervisor::Supervisor;
constexpr int kHolders = 8;

// Eight holders of 2.5 GiB leave 4 GiB free of 24 GiB. The asker's 18 GiB needs a target
// of 22.4 GiB (int(18 GiB x 1.1) + 2.25 GiB + 400 MiB): seven detaches and one partial
// unload, in upstream's order, free it.
void write_packs(const std::filesystem::path& folder) {
    std::ofstream(folder / "holder.json") << R"({"nodes": {"load": [{"op": "load_model", "model": "m", "bytes": "2560MiB"}]}})";
    std::ofstream(folder / "asker.json") << R"({"nodes": {
        "load": [{"op": "load_model", "model": "big", "bytes": "18GiB"}],
        "drop": [{"op": "drop_model", "model": "big"}]}})";
}

supervisor::Config bench_config(const std::filesystem::path& worker, const std::filesystem::path& folder) {
    supervisor::Config config;
    config.source = "bench";
    config.device.kind = supervisor::DeviceKind::simulated;  // the default is the machine's GPU
    const auto pack = [&](const std::string& name, const std::string& file) {
        supervisor::PackConfig p;
        p.name = name;
        p.command = worker.string();
        p.args = {"--pack", (folder / file).string()};
        p.working_directory = folder.string();
        return p;
    };
    for (int i = 1; i <= kHolders; ++i) config.packs.push_back(pack("holder" + std::to_string(i), "holder.json"));
    config.packs.push_back(pack("asker", "asker.json"));
    return config;
}

// Drives the cycles through the supervisor's own loop: holders load, the asker loads
// (timed), the asker drops, again.
class Cycles {
public:
    Cycles(Supervisor& supervisor, int cycles) : supervisor_(supervisor), cycles_(cycles) {}

    void start() {
        supervisor_.on_all_started([this] { load_holders(); });
        supervisor_.observe_arbitration([this](const arbiter::Event& event, const std::vector<arbiter::Action>& actions) {
            observe(event, actions);
        });
    }
    std::vector<double> samples;
    std::string failure;

private:
    static constexpr std::uint32_t kAskerSlot = kHolders + 1;  // packs fill slots from 1

    // One after another: loads at once would each count the others' grants as spoken
    // for, and the last holders would evict the first (the arbiter is right to do so).
    void load_holders(int next = 1) {
        supervisor_.submit("holder" + std::to_string(next), "load", 1, 0, [this, next](const Message& reply) {
            if (!ok(reply, "a holder's load")) return;
            if (next == kHolders) {
                load_asker();
            } else {
                load_holders(next + 1);
            }
        });
    }

    void load_asker() {
        evictions_ = 0;
        supervisor_.submit("asker", "load", 1, 0, [this](const Message& reply) {
            if (!ok(reply, "the asker's load")) return;
            if (evictions_ != kHolders) {
                fail("the admission took " + std::to_string(evictions_) + " evictions, not 8: the setup is wrong");
                return;
            }
            supervisor_.submit("asker", "drop", 1, 1, [this](const Message& dropped) {
                if (!ok(dropped, "the asker's drop")) return;
                if (static_cast<int>(samples.size()) == cycles_) {
                    supervisor_.begin_shutdown("benchmark done");
                } else {
                    load_holders();
                }
            });
        });
    }

    void observe(const arbiter::Event& event, const std::vector<arbiter::Action>& actions) {
        const auto* admission = std::get_if<arbiter::event::Admission>(&event);
        if (admission && admission->who.slot == kAskerSlot) {
            asked_at_ = Clock::now();
            timing_ = true;
        }
        if (!timing_) return;
        for (const auto& action : actions) {
            if (std::holds_alternative<arbiter::action::SendDetach>(action) ||
                std::holds_alternative<arbiter::action::SendPartialUnload>(action)) {
                ++evictions_;
            }
            const auto* grant = std::get_if<arbiter::action::Grant>(&action);
            if (grant && grant->to.slot == kAskerSlot) {
                samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - asked_at_).count());
                timing_ = false;
            }
        }
    }

    bool ok(const Message& reply, const std::string& what) {
        const auto* result = std::get_if<WorkResult>(&reply.payload);
        if (result && result->status == static_cast<std::uint32_t>(WorkStatus::ok)) return true;
        fail(what + " failed");
        return false;
    }

    void fail(const std::string& why) {
        failure = why;
        supervisor_.begin_shutdown("benchmark failed");
    }

    Supervisor& supervisor_;
    int cycles_;
    int evictions_ = 0;
    bool timing_ = false;
    Clock::time_point asked_at_{};
};

}  // namespace

std::vector<double> measure_admit_evict8(const std::filesystem::path& worker, int cycles) {
    const auto folder = std::filesystem::temp_directory_path() / ("comfy-bench-evict8-" + std::to_string(::getpid()));
    std::filesystem::create_directories(folder);
    write_packs(folder);
    std::vector<double> samples;
    std::string failure;
    try {
        Supervisor supervisor(bench_config(worker, folder), "bench-evict8-" + std::to_string(::getpid()));
        Cycles driver(supervisor, cycles);
        driver.start();
        supervisor.run();
        samples = std::move(driver.samples);
        failure = driver.failure;
    } catch (...) {
        std::filesystem::remove_all(folder);
        throw;
    }
    std::filesystem::remove_all(folder);
    if (!failure.empty()) throw std::runtime_error("admit_evict8: " + failure);
    if (static_cast<int>(samples.size()) != cycles) throw std::runtime_error("admit_evict8: the cycles did not complete");
    return samples;
}

}  // namespace comfy::bench
