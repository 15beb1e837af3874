// Catch2's runner for every test executable, followed by the leak check: a test process
// that leaves a child process or one of its shared-memory segments behind fails, even
// when every assertion passed. (catch_discover_tests runs each test case in a process of
// its own, so the check is per test case.)
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tests/support/leak_check.hpp"

#include <sys/prctl.h>

#include <cstdio>

int main(int argc, char* argv[]) {
    // Orphaned descendants (a killed supervisor's workers) become our children, so the
    // leak check below sees them too.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    const int failed = Catch::Session().run(argc, argv);
    const auto leaks = comfy::test::collect_and_clean_leaks();
    for (const auto& leak : leaks) std::fprintf(stderr, "LEAK: %s\n", leak.c_str());
    if (!leaks.empty()) {
        std::fprintf(stderr, "test failed: it left %zu resource(s) behind (see LEAK lines)\n", leaks.size());
        return 1;
    }
    return failed;
}
