// Receipts from a participant that lies: what it says it freed counts only for a release or
// an eviction the supervisor asked of it, and no more than the device holds; every receipt
// refused, whole or in part, is counted in the metrics.
#include <catch2/catch.hpp>

#include "tests/support/http_client.hpp"
#include "tests/support/supervisor_process.hpp"

#include <signal.h>

#include <sstream>

using namespace comfy;
using namespace comfy::test;
using nlohmann::json;

namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

// The value of `sample` (a metric's name with its labels, as the page writes it), or
// nothing when the page has no such line.
std::optional<std::uint64_t> sample_of(const std::string& page, const std::string& sample) {
    std::istringstream lines(page);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind(sample + " ", 0) == 0) return std::stoull(line.substr(sample.size() + 1));
    }
    return std::nullopt;
}

const std::string kUnasked = "comfy_receipts_refused_total{reason=\"unasked\"}";
const std::string kBeyond = "comfy_receipts_refused_total{reason=\"beyond_bound\"}";

}  // namespace

TEST_CASE("receipts count only for what was asked, at most what the device holds, and each refusal is counted") {
    json config = memory_config_of(json::array({misbehaving_pack("liar", "receipt-liar")}));
    config["http"] = {{"listen", "127.0.0.1:0"}};
    SupervisorProcess supervisor(config);
    const auto port = http_port(supervisor);
    REQUIRE(port);
    std::string page;
    const auto scrape = [&] {
        page = http_request(*port, "GET", "/metrics").body;
        return page;
    };
    // 200 release receipts and 16,400 unload receipts that nothing asked for: 1 PiB each.
    const bool all_refused = eventually([&] { return sample_of(scrape(), kUnasked) == 16'600u; },
                                        std::chrono::seconds(60));
    INFO(page);
    REQUIRE(all_refused);
    // An idle sweep may have asked it for a release already: each such answer counts, once,
    // as the device's whole 24 GiB, never as the 1 PiB it claims.
    const auto beyond = sample_of(page, kBeyond).value_or(0);
    CHECK(sample_of(page, "comfy_released_bytes_total") == beyond * 24 * kGiB);
    CHECK(sample_of(page, "comfy_evicted_bytes_total") == 0u);

    // The operator's release is asked of it, and its answer counts as far as the device goes.
    supervisor.kill(SIGUSR1);
    CHECK(eventually([&] { return sample_of(scrape(), kBeyond).value_or(0) > beyond; }, std::chrono::seconds(30)));
    const auto answered = sample_of(page, kBeyond).value_or(0);
    CHECK(sample_of(page, "comfy_released_bytes_total") == answered * 24 * kGiB);
    CHECK(sample_of(page, kUnasked) == 16'600u);
    CHECK(supervisor.stop() == 0);
}
