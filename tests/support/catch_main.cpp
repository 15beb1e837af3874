// Catch2's runner for every test executable, followed by the leak check: a test process
// that leaves a child process or one of its shared-memory segments behind fails, even
// when every assertion passed. (catch_discover_tests runs each test case in a process of
// its own, so the check is per test case.) Under a sanitizer build, a sanitizer report from
// any process of the test fails it too (sanitizer_reports.hpp).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tests/support/leak_check.hpp"
#include "tests/support/sanitizer_reports.hpp"

#include <sys/prctl.h>

#include <cstdio>

int main(int argc, char* argv[]) {
    // Orphaned descendants (a killed supervisor's workers) become our children, so the
    // leak check below sees them too.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    comfy::test::remove_stale_segments();
    comfy::test::start_sanitizer_reports();
    const int failed = Catch::Session().run(argc, argv);
    const auto leaks = comfy::test::collect_and_clean_leaks();
    for (const auto& leak : leaks) std::fprintf(stderr, "LEAK: %s\n", leak.c_str());
    // After the leak check, which has reaped every process the test left.
    const auto reports = comfy::test::take_sanitizer_reports();
    for (const auto& report : reports) std::fprintf(stderr, "SANITIZER REPORT %s\n", report.c_str());
    if (!leaks.empty()) {
        std::fprintf(stderr, "test failed: it left %zu resource(s) behind (see LEAK lines)\n", leaks.size());
        return 1;
    }
    if (!reports.empty()) {
        std::fprintf(stderr, "test failed: %zu sanitizer report(s) from its processes (see SANITIZER REPORT above)\n",
                     reports.size());
        return 1;
    }
    return failed;
}
