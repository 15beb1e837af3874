#pragma once
// Warm templates (docs/PACKS.md, "Warm templates"): for each interpreter and environment
// that two or more Python packs share, one process that imported torch, numpy and
// comfy_supervisor's worker side once and froze them (comfy_supervisor/template), from which
// those packs' workers are forked. A forked worker shares the template's pages: it starts
// in a fraction of the time, and holds a fraction of the private memory, of one that
// imports everything itself.
//
// The worker is the supervisor's child like any other (the template forks twice, and the
// supervisor is the subreaper), with the descriptors, environment, working directory and
// set-up spawn_process gives: everything after the spawn is the same. A pack with no
// template ready, a fork the template refuses, or an answer that does not come in time is
// spawned cold, as before; a pack whose environment turns out not to be the template's
// (its own numpy, another variable) execs its command in the forked process and starts
// cold there (template/warm_start.py).

#include "supervisor/config/config.hpp"
#include "supervisor/lifecycle/child_output.hpp"
#include "supervisor/lifecycle/process_spawner.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace comfy::supervisor {

class WarmTemplates {
public:
    // How long a fork may take before the template is taken for broken: its answer comes
    // within tens of milliseconds (two forks of a process that imported torch).
    static constexpr std::chrono::milliseconds kForkAnswer{5000};

    // One template for each interpreter and environment at least two of `packs` share
    // (Python packs, not sandboxed, whose config leaves warm_template on), in `instance`.
    // It runs `host`'s command where that resolves to the same interpreter (ComfyUI's own,
    // whose packages the packs' environments find after their own), else its first pack's.
    WarmTemplates(boost::asio::io_context& io, const std::vector<PackConfig>& packs,
                  const std::optional<PackConfig>& host, const std::string& instance);
    ~WarmTemplates();

    // Starts each template; `settled` is called once each is ready or failed, at once when
    // there is none, so that the packs' first workers fork from them.
    void start(std::function<void()> settled);
    // `pack`'s worker: forked from its template when it has one ready, else spawned (in its
    // sandbox, where configured) as before; `forked_from` names the template, or is empty.
    // A fork blocks until the template answers, at most kForkAnswer. Throws as
    // spawn_process does.
    SpawnedProcess start_process(const PackConfig& pack, const SpawnRequest& request, std::string& forked_from);
    // A template's own process, which a stray sweep leaves alone.
    bool owns(pid_t pid) const;
    // At shutdown: each template ends and is reaped; none starts again.
    void stop();

private:
    struct Template;
    void launch(Template& warm);
    void await_ready(Template& warm);
    // It cannot serve, said in the log: ended, its packs start cold.
    void refuse(Template& warm, const std::string& why);
    void watch_exit(Template& warm);
    void ended(Template& warm, const std::string& why);
    void settle_if_done();
    Template* template_of(const PackConfig& pack) const;
    // A worker forked from `pack`'s template, or nothing when it has none ready or the fork
    // failed (said in the log).
    std::optional<SpawnedProcess> fork(const PackConfig& pack, const SpawnRequest& request);

    boost::asio::io_context& io_;
    std::vector<std::unique_ptr<Template>> templates_;
    std::map<std::string, Template*> by_pack_;  // a pack's name -> its template
    std::function<void()> settled_;
    std::uint64_t next_request_ = 1;
    bool stopped_ = false;
};

}  // namespace comfy::supervisor
