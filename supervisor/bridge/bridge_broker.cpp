#include "supervisor/bridge/bridge_broker.hpp"

#include "ipc/descriptor_passing.hpp"
#include "supervisor/bridge/bridge_messages.hpp"
#include "supervisor/ctl/segment_report.hpp"
#include "supervisor/ops/log/log.hpp"

#include <fcntl.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace comfy::supervisor {

namespace {

constexpr const char* kNotReading = "does not read its bridge control socket";

// An arena is named in /proc/PID/maps for its writer's life ("comfy-sv-arena-bridge-2"),
// and the host's for the pack life it writes for ("comfy-sv-arena-host-1-to-bridge-2").
constexpr const char* kArenaLabel = "comfy-sv-arena-";

std::string life_name(const std::string& name, std::uint32_t generation) {
    return name + "-" + std::to_string(generation);
}

}  // namespace

BridgeBroker::BridgeBroker(const std::vector<std::unique_ptr<WorkerProcess>>& workers, Stop stop,
                           HostRequests& host_requests)
    : workers_(workers), stop_(std::move(stop)), host_requests_(host_requests) {}

std::optional<BridgeBroker::ChildEnds> BridgeBroker::open_life(const WorkerProcess& worker) {
    lives_.erase(worker.slot);
    if (!worker.pack.bridges) return std::nullopt;
    // The host has no arena of its own: it writes one for each pack life (pair()).
    ipc::Arena arena;
    if (worker.kind != ParticipantKind::host) {
        arena = ipc::create_arena(kArenaLabel + life_name(worker.pack.name, worker.generation), worker.pack.arena_bytes);
    }
    ipc::SocketPair control;
    try {
        control = ipc::make_socket_pair(SOCK_SEQPACKET);
    } catch (const std::system_error& error) {
        throw std::runtime_error(std::string("bridge control socket: ") + error.what());
    }
    // Our end never blocks the loop: a child that does not read is found full, not waited for.
    const int flags = ::fcntl(control.first.get(), F_GETFL);
    if (flags < 0 || ::fcntl(control.first.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
        throw std::runtime_error(std::string("bridge control socket: fcntl: ") + std::strerror(errno));
    }
    // Nothing a pack writes is read here; shut for reading, its writes fail at once
    // (EPIPE) rather than pile up, descriptors and all, in our receive queue. The host's
    // requests are read (host_requests.hpp).
    if (worker.kind == ParticipantKind::host) {
        host_requests_.listen(control.first.get());
    } else {
        ::shutdown(control.first.get(), SHUT_RD);
    }
    lives_[worker.slot] = Life{worker.generation, std::move(control.first), std::move(arena.read_only)};
    return ChildEnds{std::move(control.second), std::move(arena.writable), arena.bytes};
}

void BridgeBroker::spawned(WorkerProcess& worker) {
    if (!lives_.contains(worker.slot)) return;
    if (worker.kind == ParticipantKind::host) {
        std::vector<bridge::PackState> packs;
        for (const auto& pack : workers_) {
            if (is_python_pack(*pack)) {
                packs.push_back({pack->pack.name, ctl::state_name(static_cast<std::uint8_t>(pack->state)),
                                 pack->pack.python->folders,
                                 static_cast<std::uint64_t>(pack->pack.python->cancel_grace.count())});
            }
        }
        const auto& limits = worker.pack.browser_messages;
        send(worker, bridge::packs(packs, {limits.max_bytes, limits.per_second, limits.bytes_per_second}));
        for (const auto& pack : workers_) {
            if (is_python_pack(*pack) && lives_.contains(pack->slot)) pair(worker, *pack);
        }
    } else if (WorkerProcess* const the_host = host(); the_host != nullptr && lives_.contains(the_host->slot)) {
        pair(*the_host, worker);
    }
}

void BridgeBroker::exited(WorkerProcess& worker, const std::string& reason, bool restarts) {
    WorkerProcess* const the_host = host();
    if (is_python_pack(worker) && the_host != nullptr) {
        send(*the_host, bridge::pack_exited(worker.pack.name, worker.generation, worker.last_exit_status,
                                            worker.last_exit_signal, reason, restarts));
    }
    close_life(worker);
}

void BridgeBroker::close_life(const WorkerProcess& worker) {
    if (worker.kind == ParticipantKind::host) host_requests_.stop();
    lives_.erase(worker.slot);
}

void BridgeBroker::failed(const WorkerProcess& worker, const std::string& reason) {
    WorkerProcess* const the_host = host();
    if (is_python_pack(worker) && the_host != nullptr) send(*the_host, bridge::pack_failed(worker.pack.name, reason));
}

WorkerProcess* BridgeBroker::host() const {
    for (const auto& worker : workers_) {
        if (worker->kind == ParticipantKind::host) return worker.get();
    }
    return nullptr;
}

void BridgeBroker::pair(WorkerProcess& host, WorkerProcess& pack) {
    const Life& host_life = lives_.at(host.slot);
    const Life& pack_life = lives_.at(pack.slot);
    ipc::SocketPair call;
    ipc::Arena for_pack;
    try {
        call = ipc::make_socket_pair(SOCK_STREAM);
        // What the host sends this pack life lies in an arena no other pack is given.
        for_pack = ipc::create_arena(kArenaLabel + life_name(host.pack.name, host_life.generation) + "-to-" +
                                         life_name(pack.pack.name, pack_life.generation),
                                     host.pack.arena_bytes);
    } catch (const std::exception& error) {
        log_line(LogLevel::info, pack.pack.name + ": cannot pair it with the host: " + error.what(),
                 pack.log_fields("bridge"));
        return;
    }
    // Our copies of the call channel's ends and of the host's arena for the pack close
    // when `call` and `for_pack` go: they are the two sides' alone.
    send(host, bridge::pack_started(pack.pack.name, pack_life.generation),
         std::array{call.first.get(), pack_life.arena_read_only.get(), for_pack.writable.get()});
    send(pack, bridge::host_started(host_life.generation), std::array{call.second.get(), for_pack.read_only.get()});
}

void BridgeBroker::send(WorkerProcess& to, const std::string& message, std::span<const int> fds) {
    const auto life = lives_.find(to.slot);
    if (life == lives_.end()) return;
    try {
        // A child that is gone (EPIPE) is left to its pidfd, which reports its exit.
        if (ipc::send_with_descriptors(life->second.control.get(), message, fds) == ipc::SendResult::full) {
            stop_(to, kNotReading);
        }
    } catch (const std::system_error& error) {
        log_line(LogLevel::info, to.pack.name + ": cannot write its bridge control socket: " + error.what(),
                 to.log_fields("bridge"));
    }
}

}  // namespace comfy::supervisor
