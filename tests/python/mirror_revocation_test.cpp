// A mirror's revocation takes the host's pages back (docs/SECURITY.md, "A mirror lets a pack
// read a host model's weights"): tests/packs/hostile_pack's KeepMirror keeps the memfd its
// mirror came on, every way it can, past the host's eviction and past the host dropping the
// MODEL; what it kept reads zeros and the host's copy holds no pages (tests/host/mirror_checks.py,
// mirror-kept-descriptor). Outside the sandbox the pack also reopens the memfd through
// /proc/self/map_files (as root) and takes the host's own descriptor through /proc/PID/fd.
#include <catch2/catch.hpp>

#include "tests/python/bridge_checks_run.hpp"
#include "tests/support/sandbox_skip.hpp"

#include <unistd.h>

using namespace comfy::test;
using Catch::Matchers::Contains;
using nlohmann::json;

TEST_CASE("a hostile pack that keeps a mirror's memfd past its revocation reads zeros, and the host's pages are freed") {
    const auto log = run_checks({"mirror-kept-descriptor"}, json::array({python_pack("hostile", "hostile_pack")}));
    CHECK_THAT(log, Contains("mirror-kept-descriptor: the pack kept dup, reopened, mapping"));
    if (::geteuid() == 0) CHECK_THAT(log, Contains(", map_files, owner_fd_0"));  // CAP_SYS_ADMIN, and the host's /proc
}

TEST_CASE("a sandboxed hostile pack that keeps a mirror's memfd past its revocation reads zeros, and the host's pages are freed") {
    SKIP_WITHOUT_BWRAP();
    json hostile = python_pack("hostile", "hostile_pack");
    hostile["sandbox"] = json::object();
    const auto log = run_checks({"mirror-kept-descriptor"}, json::array({hostile}));
    CHECK_THAT(log, Contains("mirror-kept-descriptor: the pack kept dup, reopened, mapping, map_files (PermissionError)"));
    reap_orphans();
}
