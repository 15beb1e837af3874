// comfy-soak: the demo's supervisor, packs and prompts under faults injected at random
// from a printed seed, checked as it goes; exit status 0 with no breach, 1 with any, 2
// when it could not run. SIGINT or SIGTERM ends it early, with its report. scripts/soak
// builds and runs it.
#include "tests/soak/soak.hpp"

#include <signal.h>

#include <cstdio>
#include <exception>
#include <random>

int main(int argc, char* argv[]) {
    using namespace comfy::soak;
    SoakOptions options;
    try {
        options = parse_soak_options(std::vector<std::string>(argv + 1, argv + argc));
    } catch (const UsageError& error) {
        std::fprintf(stderr, "comfy-soak: %s; %s; see comfy-soak --help\n", error.what(), soak_usage());
        return 2;
    }
    if (options.print) return std::fputs(options.print->c_str(), stdout) < 0 ? 1 : 0;
    struct sigaction stop {};
    stop.sa_handler = [](int) { request_stop(); };
    ::sigaction(SIGINT, &stop, nullptr);
    ::sigaction(SIGTERM, &stop, nullptr);
    std::random_device entropy;
    const std::uint64_t seed = options.seed.value_or((std::uint64_t{entropy()} << 32) | entropy());
    try {
        Soak soak(options, seed);
        const SoakReport report = soak.run();
        if (options.json) {
            std::puts(to_json(report).dump(2).c_str());
        } else {
            print_text(report);
        }
        return report.breaches.empty() ? 0 : 1;
    } catch (const std::exception& error) {
        std::fprintf(stderr, "comfy-soak: %s (seed %llu)\n", error.what(), static_cast<unsigned long long>(seed));
        return 2;
    }
}
