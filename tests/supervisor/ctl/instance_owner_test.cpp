// An instance run by another user (the service's, seen from root's shell): found by its
// segment's owner, and said in one line, by the function and by the real comfyctl.
#include <catch2/catch.hpp>

#include "supervisor/ctl/instance_owner.hpp"
#include "tests/support/test_instance.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <algorithm>
#include <fstream>

#ifndef COMFYCTL_PATH
#error "COMFYCTL_PATH must name the comfyctl binary (set in tests/CMakeLists.txt)"
#endif

using namespace comfy;
using Catch::Matchers::Contains;

namespace {

constexpr uid_t kOther = 4242;  // a uid no test runs as

struct Folder {
    Folder() {
        char name[] = "/tmp/comfy-owner-XXXXXX";
        REQUIRE(::mkdtemp(name) != nullptr);
        path = name;
    }
    ~Folder() { std::filesystem::remove_all(path); }
    std::filesystem::path path;
};

void touch(const std::filesystem::path& file) { std::ofstream(file) << "x"; }

}  // namespace

TEST_CASE("another user's segment of the instance is found by its owner, not by its name") {
    Folder shm;
    const uid_t me = ::geteuid();
    touch(shm.path / ("comfy-sv-" + std::to_string(me) + "-gpu0"));
    touch(shm.path / ("comfy-sv-" + std::to_string(me) + "-gpu0.init-77"));  // a creator's, mid-publication
    touch(shm.path / ("comfy-sv-" + std::to_string(me) + "-gpu0-b"));       // another instance
    CHECK_FALSE(ctl::instance_of_another_user("gpu0", me, shm.path));
    // Seen by a user other than its owner, whatever uid its name claims.
    const auto other = ctl::instance_of_another_user("gpu0", me + 1, shm.path);
    REQUIRE(other);
    CHECK(other->uid == me);
    CHECK(other->segment == "/comfy-sv-" + std::to_string(me) + "-gpu0");
    CHECK_FALSE(ctl::instance_of_another_user("gpu1", me + 1, shm.path));
    CHECK_FALSE(ctl::instance_of_another_user("gpu0", me, "/nonexistent-folder"));

    const auto line = ctl::another_user_line("gpu0", {0, "/comfy-sv-0-gpu0"});
    CHECK(line.find('\n') == std::string::npos);
    CHECK_THAT(line, Contains("instance 'gpu0' is run by user root (uid 0)"));
    CHECK_THAT(line, Contains("sudo -u root comfyctl"));
    CHECK_THAT(ctl::another_user_line("gpu0", {kOther, "/comfy-sv-4242-gpu0"}), Contains("sudo -u '#4242'"));
}

TEST_CASE("comfyctl as root says in one line that the instance is another user's") {
    if (::geteuid() != 0) {
        WARN("not root: no segment of another user can be made here, so comfyctl's line about one is not tried");
        return;
    }
    const auto instance = test::test_instance("owner");
    const std::string name = "/comfy-sv-" + std::to_string(kOther) + "-" + instance;
    const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    REQUIRE(fd >= 0);
    // Not under this test process's own uid: the leak check would not find it, so it goes here.
    struct Unlink {
        const std::string& name;
        ~Unlink() { ::shm_unlink(name.c_str()); }
    } unlink{name};
    REQUIRE(::fchown(fd, kOther, kOther) == 0);
    ::close(fd);

    const std::string command = std::string(COMFYCTL_PATH) + " --instance " + instance + " workers 2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string output;
    std::array<char, 512> buffer{};
    while (const auto n = std::fread(buffer.data(), 1, buffer.size(), pipe)) output.append(buffer.data(), n);
    const int status = ::pclose(pipe);
    INFO(output);
    CHECK(WEXITSTATUS(status) == 1);
    CHECK(std::count(output.begin(), output.end(), '\n') == 1);
    CHECK_THAT(output, Contains("comfyctl: instance '" + instance + "' is run by uid 4242, not by uid 0: its segment " +
                                name + " and its control socket are that user's alone"));
}
