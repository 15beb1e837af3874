// The pieces of the node-call bridge, each on its own: descriptors sent with a message
// arrive as the same files; a send to a reader that does not read is found full, and one
// to a reader that is gone is told apart; an arena is sparse, sealed, and read-only
// through the descriptor peers get; the control events have the formats the Python side
// reads.
#include <catch2/catch.hpp>

#include "ipc/arena.hpp"
#include "ipc/descriptor_passing.hpp"
#include "supervisor/bridge/bridge_messages.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <system_error>

using namespace comfy;
namespace bridge = comfy::supervisor::bridge;

namespace {

bool same_file(int a, int b) {
    struct stat first {};
    struct stat second {};
    REQUIRE(::fstat(a, &first) == 0);
    REQUIRE(::fstat(b, &second) == 0);
    return first.st_dev == second.st_dev && first.st_ino == second.st_ino;
}

}  // namespace

TEST_CASE("a message's descriptors arrive as the same files, close-on-exec") {
    auto control = ipc::make_socket_pair(SOCK_SEQPACKET);
    auto call = ipc::make_socket_pair(SOCK_STREAM);
    const auto arena = ipc::create_arena("comfy-test-arena", 1 << 20);
    const std::array fds{call.first.get(), arena.read_only.get()};
    REQUIRE(ipc::send_with_descriptors(control.first.get(), R"({"event":"x"})", fds) == ipc::SendResult::sent);
    REQUIRE(ipc::send_with_descriptors(control.first.get(), "second") == ipc::SendResult::sent);

    auto received = ipc::receive_with_descriptors(control.second.get(), 4096, 4);
    CHECK(received.payload == R"({"event":"x"})");
    CHECK_FALSE(received.truncated);
    REQUIRE(received.fds.size() == 2);
    CHECK(same_file(received.fds[0].get(), call.first.get()));
    CHECK(same_file(received.fds[1].get(), arena.writable.get()));
    CHECK((::fcntl(received.fds[0].get(), F_GETFD) & FD_CLOEXEC) != 0);
    // One datagram each: the second message is not run together with the first.
    const auto second = ipc::receive_with_descriptors(control.second.get(), 4096, 4);
    CHECK(second.payload == "second");
    CHECK(second.fds.empty());
}

TEST_CASE("a send to a reader that does not read is full, and one to a reader that is gone is told apart") {
    auto control = ipc::make_socket_pair(SOCK_SEQPACKET);
    const std::string message(1024, 'x');
    int sent = 0;
    ipc::SendResult result = ipc::SendResult::sent;
    while (sent < 100000 && (result = ipc::send_with_descriptors(control.first.get(), message)) == ipc::SendResult::sent) {
        ++sent;
    }
    CHECK(result == ipc::SendResult::full);
    CHECK(sent > 10);  // room for many small events before a reader is judged not to read

    auto other = ipc::make_socket_pair(SOCK_SEQPACKET);
    other.second.reset();
    CHECK(ipc::send_with_descriptors(other.first.get(), "hello") == ipc::SendResult::peer_gone);
    CHECK_THROWS_AS(ipc::send_with_descriptors(-1, "hello"), std::system_error);
}

TEST_CASE("an arena is sparse and sealed, and its read-only descriptor maps only privately") {
    constexpr std::size_t kBytes = std::size_t{64} << 20;
    const auto arena = ipc::create_arena("comfy-test-arena", kBytes);
    CHECK(arena.bytes == kBytes);
    struct stat st {};
    REQUIRE(::fstat(arena.writable.get(), &st) == 0);
    CHECK(static_cast<std::size_t>(st.st_size) == kBytes);
    CHECK(st.st_blocks == 0);  // nothing written, nothing used
    CHECK(::fcntl(arena.writable.get(), F_GET_SEALS) == (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
    CHECK(::ftruncate(arena.writable.get(), 4096) != 0);
    CHECK((::fcntl(arena.read_only.get(), F_GETFL) & O_ACCMODE) == O_RDONLY);
    CHECK((::fcntl(arena.read_only.get(), F_GETFD) & FD_CLOEXEC) != 0);

    // The producer writes; a peer's shared writable mapping is refused, its private one sees
    // the producer's bytes and its own writes stay its own.
    void* produced = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, arena.writable.get(), 0);
    REQUIRE(produced != MAP_FAILED);
    std::memcpy(produced, "value", 6);
    CHECK(::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, arena.read_only.get(), 0) == MAP_FAILED);
    CHECK(errno == EACCES);
    void* peer = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, arena.read_only.get(), 0);
    REQUIRE(peer != MAP_FAILED);
    CHECK(std::strcmp(static_cast<const char*>(peer), "value") == 0);
    std::memcpy(peer, "junk", 5);
    CHECK(std::strcmp(static_cast<const char*>(produced), "value") == 0);
    REQUIRE(::fstat(arena.writable.get(), &st) == 0);
    CHECK(st.st_blocks * 512 <= 64 * 1024);  // one page written, one page used
    ::munmap(peer, kBytes);
    ::munmap(produced, kBytes);
}

TEST_CASE("the bridge's control events have the formats the Python side reads") {
    CHECK(bridge::packs({{"impact", "spawning", {"/srv/impact", "/srv/subpack"}, 3000},
                         {"video", "failed", {"/srv/video"}, 0}},
                        {1048576, 100, 16777216}) ==
          R"({"event":"packs","packs":[{"name":"impact","state":"spawning","folders":["/srv/impact","/srv/subpack"],)"
          R"("cancel_grace_ms":3000},{"name":"video","state":"failed","folders":["/srv/video"],"cancel_grace_ms":0}],)"
          R"("browser_messages":{"max_bytes":1048576,"per_second":100,"bytes_per_second":16777216}})");
    CHECK(bridge::packs({}, {1024, 1, 1024}) ==
          R"({"event":"packs","packs":[],"browser_messages":{"max_bytes":1024,"per_second":1,"bytes_per_second":1024}})");
    CHECK(bridge::pack_started("impact", 3) == R"({"event":"pack_started","pack":"impact","generation":3})");
    CHECK(bridge::host_started(2) == R"({"event":"host_started","generation":2})");
    CHECK(bridge::pack_exited("impact", 3, -1, 9, "killed by SIGKILL", true) ==
          R"({"event":"pack_exited","pack":"impact","generation":3,"status":-1,"signal":9,)"
          R"("reason":"killed by SIGKILL","restarts":true})");
    CHECK(bridge::pack_failed("impact", "more than 5 restarts") ==
          R"({"event":"pack_failed","pack":"impact","reason":"more than 5 restarts"})");
    // A reason that is not UTF-8 (a path's bytes) is still valid JSON.
    CHECK(bridge::pack_failed("a", "bad \xff byte") == "{\"event\":\"pack_failed\",\"pack\":\"a\",\"reason\":\"bad \xEF\xBF\xBD byte\"}");
}
