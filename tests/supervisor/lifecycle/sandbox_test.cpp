// The sandbox's bwrap invocation, argument by argument, and the start-up check that
// says in one line when bwrap is missing. No process is started here but bwrap's trial.
#include <catch2/catch.hpp>

#include "supervisor/lifecycle/sandbox.hpp"
#include "supervisor/lifecycle/sandbox_check.hpp"
#include "tests/support/supervisor_process.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

using namespace comfy::supervisor;
using comfy::test::TempFolder;
using Catch::Matchers::Contains;

namespace {

SpawnRequest worker_request() {
    SpawnRequest request;
    request.command = "/opt/packs/video/bin/python";
    request.args = {"-m", "worker", "--fast"};
    request.environment = {{"COMFY_SV_SLOT", "3"}, {"HOME", "/home/comfy"}};
    request.working_directory = "/opt/packs/video";
    request.inherited_fds = {7, 9};
    return request;
}

SandboxConfig video_sandbox() {
    SandboxConfig sandbox;
    sandbox.writable = {"/opt/packs/video", "/var/cache/video"};
    sandbox.readable = {"/run/models"};
    return sandbox;
}

// Where `words` appear, in this order and side by side, in `args`; -1 when they do not.
long position(const std::vector<std::string>& args, const std::vector<std::string>& words) {
    const auto found = std::search(args.begin(), args.end(), words.begin(), words.end());
    return found == args.end() ? -1 : static_cast<long>(found - args.begin());
}

}  // namespace

TEST_CASE("a sandboxed worker is bwrap running the worker's command, with everything else kept") {
    const auto original = worker_request();
    const auto sandboxed = sandboxed_request(original, video_sandbox(), {});
    CHECK(sandboxed.command == kBwrapPath);
    // The worker's command and arguments come last, after "--", as given.
    const std::vector<std::string> tail{"--", "/opt/packs/video/bin/python", "-m", "worker", "--fast"};
    REQUIRE(sandboxed.args.size() > tail.size());
    CHECK(std::equal(tail.begin(), tail.end(), sandboxed.args.end() - static_cast<long>(tail.size())));
    CHECK(position(sandboxed.args, {"--chdir", "/opt/packs/video", "--"}) >= 0);
    // bwrap passes its environment and open descriptors on, so these stay as they were.
    CHECK(sandboxed.environment == original.environment);
    CHECK(sandboxed.working_directory == original.working_directory);
    CHECK(sandboxed.inherited_fds == std::vector<int>{7, 9});
}

TEST_CASE("the sandbox: dies with its parent, no network, no capabilities, read-only but its folders") {
    const auto args = sandboxed_request(worker_request(), video_sandbox(), {}).args;
    CHECK(args.front() == "--die-with-parent");
    CHECK(position(args, {"--unshare-all"}) >= 0);
    CHECK(position(args, {"--share-net"}) < 0);
    CHECK(position(args, {"--new-session"}) >= 0);
    CHECK(position(args, {"--cap-drop", "ALL"}) >= 0);
    const long root = position(args, {"--ro-bind", "/", "/"});
    const long dev = position(args, {"--dev", "/dev"});
    const long proc = position(args, {"--proc", "/proc"});
    const long shm = position(args, {"--tmpfs", "/dev/shm"});
    const long tmp = position(args, {"--tmpfs", "/tmp"});
    const long run = position(args, {"--tmpfs", "/run"});
    const long program = position(args, {"--ro-bind", "/opt/packs/video/bin/python", "/opt/packs/video/bin/python"});
    const long readable = position(args, {"--ro-bind", "/run/models", "/run/models"});
    const long folder = position(args, {"--bind", "/opt/packs/video", "/opt/packs/video"});
    const long cache = position(args, {"--bind", "/var/cache/video", "/var/cache/video"});
    for (const long at : {root, dev, proc, shm, tmp, run, program, readable, folder, cache}) CHECK(at >= 0);
    // Mounts made later cover earlier ones: the root first, /dev before its shm, the
    // hidden places before what is shown in them, and what is writable last of all.
    CHECK(root < dev);
    CHECK(dev < shm);
    CHECK(run < readable);
    CHECK(tmp < program);  // its own program stays reachable, even under /tmp
    CHECK(readable < folder);
    CHECK(folder < cache);
    CHECK(std::count(args.begin(), args.end(), "--bind") == 2);
}

TEST_CASE("a sandbox that allows the network shares the host's") {
    auto sandbox = video_sandbox();
    sandbox.network = true;
    const auto args = sandboxed_request(worker_request(), sandbox, {}).args;
    const long unshare = position(args, {"--unshare-all"});
    const long share = position(args, {"--share-net"});
    REQUIRE(share >= 0);
    CHECK(unshare < share);  // bwrap takes the later of the two
}

TEST_CASE("the GPU's device nodes are bound into the sandbox's own /dev") {
    const std::vector<std::string> devices{"/dev/dri", "/dev/nvidia-caps", "/dev/nvidia0", "/dev/nvidiactl"};
    const auto args = sandboxed_request(worker_request(), video_sandbox(), devices).args;
    const long dev = position(args, {"--dev", "/dev"});
    for (const auto& device : devices) {
        const long bound = position(args, {"--dev-bind", device, device});
        CHECK(bound > dev);
    }
}

TEST_CASE("the GPU's device nodes are those of NVIDIA, DRM and AMD's kfd, and nothing else") {
    TempFolder dev("dev");
    for (const char* name : {"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "kfd", "null", "sda", "shm"}) {
        dev.write(name, "");
    }
    std::filesystem::create_directory(dev.path() / "nvidia-caps");
    std::filesystem::create_directory(dev.path() / "dri");
    const auto at = [&](const char* name) { return (dev.path() / name).string(); };
    CHECK(gpu_device_nodes(dev.path().string()) ==
          std::vector<std::string>{at("dri"), at("kfd"), at("nvidia-caps"), at("nvidia-uvm"), at("nvidia0"),
                                   at("nvidia1"), at("nvidiactl")});
    CHECK(gpu_device_nodes((dev.path() / "absent").string()).empty());
}

TEST_CASE("a pack without a sandbox is spawned as it is") {
    PackConfig pack;
    pack.name = "plain";
    const auto request = with_sandbox(pack, worker_request());
    CHECK(request.command == worker_request().command);
    CHECK(request.args == worker_request().args);
}

TEST_CASE("a config that asks for the sandbox where bwrap is missing is refused in one line") {
    Config config;
    config.source = "conf/sv.json";
    PackConfig plain;
    plain.name = "plain";
    plain.working_directory = "/";
    config.packs.push_back(plain);
    CHECK_FALSE(sandbox_problem(config, "/nonexistent/bwrap"));  // nobody asks: bwrap is not needed

    PackConfig boxed = plain;
    boxed.name = "boxed";
    boxed.sandbox = SandboxConfig{};
    config.packs.push_back(boxed);
    const auto problem = sandbox_problem(config, "/nonexistent/bwrap");
    REQUIRE(problem);
    CHECK(*problem ==
          "conf/sv.json: pack \"boxed\" asks for a sandbox, but /nonexistent/bwrap cannot be run (No such file or "
          "directory); install bubblewrap (apt-get install bubblewrap) or remove its \"sandbox\" from the config");
}

TEST_CASE("bwrap that cannot make the sandbox is refused with its own words") {
    TempFolder folder("fake-bwrap");
    // Stands in for bwrap on a kernel without unprivileged user namespaces.
    const auto fake = folder.write("bwrap", "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\n"
                                            "echo 'second line' >&2\nexit 1\n");
    std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
    Config config;
    config.source = "sv.json";
    PackConfig host;
    host.name = kHostParticipantName;
    host.working_directory = "/";
    host.sandbox = SandboxConfig{};
    config.comfyui = host;
    const auto problem = sandbox_problem(config, fake.string());
    REQUIRE(problem);
    CHECK(*problem ==
          "sv.json: the ComfyUI host (/comfyui) asks for a sandbox, but bwrap cannot make one here: bwrap: No "
          "permissions to create new namespace; let it create namespaces (see \"When bwrap cannot run\" in "
          "docs/SECURITY.md) or remove its \"sandbox\" from the config");
}
