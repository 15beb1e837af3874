#pragma once
// The operator's HTTP endpoints as this supervisor answers them (the routes are in
// ops_routes.hpp, the server in ops_http.hpp): the memory history sampled for GET
// /memory-history, and each answer made from the supervisor's figures. Runs on the supervisor's
// loop; off unless the config names a listen address.

#include "ipc/shm_segment.hpp"
#include "supervisor/config/config.hpp"
#include "supervisor/lifecycle/worker_access.hpp"
#include "supervisor/memory/census_reader.hpp"
#include "supervisor/memory/memory_broker.hpp"
#include "supervisor/memory/release_scheduler.hpp"
#include "supervisor/ops/free_request.hpp"
#include "supervisor/ops/log/event_journal.hpp"
#include "supervisor/ops/ops_http.hpp"
#include "supervisor/ops/refusals.hpp"
#include "supervisor/ops/supervised.hpp"

#include <boost/asio/io_context.hpp>

#include <memory>
#include <optional>
#include <string>

namespace comfy::supervisor {

class HistorySampler;
struct MemorySample;

class OpsEndpoints {
public:
    // What the answers are read from; each outlives this object.
    struct Sources {
        const Supervised& supervisor;  // totals, census rows
        const Config& config;
        const std::string& instance;
        const ipc::SharedSegment& segment;
        CensusReader& census;
        MemoryBroker& memory;
        ReleaseScheduler& releases;
        EventJournal& journal;
        WorkerAccess& workers;
        Refusals& refusals;  // counted by the HTTP server, read by the metrics
    };
    OpsEndpoints(boost::asio::io_context& io, Sources sources);
    ~OpsEndpoints();

    // Binds the configured address (throws std::system_error when it cannot), starts the
    // history and serves; nothing when no address is configured.
    void start();
    void stop();

private:
    void answer_free(const FreeRequest& request);
    std::string census_json() const;
    std::string metrics_text();
    MemorySample sample();

    boost::asio::io_context& io_;
    Sources from_;
    std::optional<OpsHttpServer> http_;
    std::unique_ptr<HistorySampler> history_;  // GET /memory-history; sampled while HTTP is on
};

}  // namespace comfy::supervisor
