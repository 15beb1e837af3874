#pragma once
// The soak: the demo's supervisor, packs and prompts under faults for a given time, with
// every check made as it goes and at the end. A breach is one line; the run goes on
// after one where it can, so that one run reports all it finds.

#include "supervisor/ctl/segment_report.hpp"
#include "tests/soak/fault_plan.hpp"
#include "tests/soak/soak_options.hpp"
#include "tests/soak/soak_report.hpp"
#include "tests/soak/soak_setup.hpp"
#include "tests/soak/stall_watch.hpp"
#include "tests/soak/supervisor_run.hpp"

#include <functional>
#include <memory>
#include <set>

namespace comfy::soak {

// Ends a running soak early, after the fault in hand, with its report (for SIGINT and
// SIGTERM; async-signal-safe).
void request_stop() noexcept;

class Soak {
public:
    Soak(const SoakOptions& options, std::uint64_t seed);
    ~Soak();  // removes its folder unless a breach or --keep-logs keeps it
    Soak(const Soak&) = delete;
    Soak& operator=(const Soak&) = delete;

    SoakReport run();

private:
    // A participant as the segment shows it while it is up.
    struct Participant {
        std::string name;
        pid_t pid;
        std::uint32_t generation;
    };
    // What the soak knows of one supervisor.
    struct Life {
        std::unique_ptr<SupervisorRun> run;
        std::set<pid_t> targeted;                         // every pid a fault was aimed at
        std::set<pid_t> must_die;                         // those its log must report dead
        std::uint32_t failures_logged = 0;                // prompts its log says failed
        std::vector<std::pair<double, double>> faulted;  // its seconds with a fault in effect
        LifeFigures figures;
    };

    // ---- lives (soak.cpp) ----
    bool start_life();
    void end_life();  // SIGTERM, then the end-of-life checks
    void check_life(Life& life, bool killed);
    void check_log(Life& life);
    void check_summary(Life& life, int status);
    void sample(LifeFigures& figures, bool at_start);
    void check_leftovers();
    // Whether the machine stalled between `from` and `to`, seconds of `life`'s clock.
    bool stalled(const Life& life, double from, double to) const;
    Life& life() { return lives_.back(); }
    bool supervisor_gone();

    // ---- faults (soak_faults.cpp) ----
    // Each returns the fault's name for the report, or nothing when it found no target.
    std::optional<std::string> inject(FaultKind kind);
    std::optional<std::string> kill(const std::string& name, FaultKind kind);
    std::optional<std::string> kill_at_eviction(FaultKind kind);
    std::optional<std::string> stop(FaultKind kind);
    std::optional<std::string> provoke_hostile();
    // The escape mode's fault, once signalled at log line `from`: the soak kills the worker,
    // and what it started outside its process group must end with it.
    std::string provoke_escape(const Participant& who, const std::string& what, std::size_t from);
    // The host calls a node of a hostile Python pack (soak_setup.hpp, kHostileCalls): one
    // that outruns Cancel or breaks the call protocol, whose life the supervisor must end,
    // the host's next call running in the new one; one that rewrites what it handed over,
    // or floods the browser, whose life goes on while the host keeps its copies and its
    // limits, and answers.
    std::optional<std::string> provoke_hostile_call();
    std::optional<std::string> kill_supervisor();
    // Signals `who`'s process, marked as a target of this life (and as one whose death the
    // log must report, when `fatal`).
    bool hit(const Participant& who, int signal, bool fatal);
    // Waits for a new life of `who` to be up; a breach when none comes.
    bool await_replacement(const Participant& who, const std::string& after);

    // ---- waiting and reading ----
    // Polls `condition` until it holds or `timeout` passes (or the supervisor is gone,
    // unless the soak is ending it).
    bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout);
    // Hands the log's lines from line `from` on to `take`, as they come, until it returns
    // true (then true) or `timeout` passes (as wait_until).
    bool watch_log(std::size_t from, const std::function<bool(const std::string& raw)>& take,
                   std::chrono::milliseconds timeout);
    static std::optional<Participant> up_in(const ctl::SegmentReport& report, const std::string& name);
    std::optional<Participant> up_now(const std::string& name);
    std::optional<Participant> wait_up(const std::string& name);
    bool all_up();
    void check_ledger(const std::string& after);
    void breach(const std::string& line);
    void say(const std::string& line) const;
    double elapsed() const;

    SoakOptions options_;
    SoakReport report_;
    FaultPlan plan_;
    std::string instance_;
    std::filesystem::path folder_;
    SoakSetup setup_;
    std::vector<Life> lives_;
    StallWatch stall_watch_;
    Clock::time_point began_ = Clock::now();
    bool gone_reported_ = false;
    bool ending_ = false;  // the soak itself is ending the supervisor: its exit is no breach
    bool abandoned_ = false;  // a supervisor did not come up: no more faults
};

}  // namespace comfy::soak
