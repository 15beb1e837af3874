#pragma once
// The arbiter's unit tests' world: the device and the owners as a test controls them
// (free is the device size minus what the owners hold), and what the tests build
// their events from.

#include "supervisor/arbiter/arbiter.hpp"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

namespace comfy::arbiter::test {

inline ModelRegistered model(std::uint64_t id, Bytes total, Bytes loaded, bool dynamic = false) {
    return ModelRegistered{id, id, total, loaded, 0, 0, static_cast<std::uint8_t>(dynamic), 0};
}

inline AdmissionRequest load_of(Bytes bytes, std::uint32_t flags = 0) {
    AdmissionRequest r{};
    r.streams = 1;
    r.bytes = bytes;
    r.flags = flags;
    return r;
}

// The admission target of a plain load, rounded up as the bytes a partial unload asks.
inline Bytes target_of(Bytes load) { return whole_bytes_up(admission_target(load, 0, 1, kDefaultReserve)); }

// The device and the owners, as the test controls them.
struct World {
    explicit World(ArbiterConfig config = {}, Bytes device_size = 24 * kGiB, std::uint32_t ledger_capacity = 64)
        : arbiter(config, ledger_capacity), total(device_size) {}

    Arbiter arbiter;
    Bytes total;
    Bytes other_use = 0;  // device memory outside the ledger
    std::uint64_t now = 0;
    std::map<std::pair<std::uint32_t, std::uint64_t>, Bytes> held;  // (slot, model) -> bytes on the device
    std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint64_t> sequence;  // of each model's last report

    Snapshot snapshot() const {
        Bytes used = other_use;
        for (const auto& [key, bytes] : held) used += bytes;
        return Snapshot{now, total, used >= total ? 0 : total - used, {}};
    }
    std::vector<Action> send(const Event& e) { return arbiter.handle(e, snapshot()); }
    void join(std::uint32_t slot) { send(event::Joined{{slot, 1}}); }
    void load(std::uint32_t slot, const ModelRegistered& m, std::uint32_t refs = 1) {
        held[{slot, m.model_id}] = m.loaded_bytes;
        sequence[{slot, m.model_id}] = 1;
        send(event::Registered{{slot, 1}, m});
        send(event::Residency{{slot, 1}, ResidencyReceipt{m.model_id, 1, m.loaded_bytes, refs, 0, 0, {}}});
    }
    // The owner frees `freed` bytes of `model` and answers with what stays loaded.
    std::vector<Action> free_and_answer(std::uint32_t slot, std::uint64_t id, Bytes asked, Bytes freed) {
        auto& bytes = held[{slot, id}];
        bytes -= std::min(bytes, freed);
        return send(event::Unloaded{{slot, 1}, UnloadReceipt{id, asked, freed, ++sequence[{slot, id}], bytes, 0, {}}});
    }
    std::vector<Action> detach_and_answer(std::uint32_t slot, std::uint64_t id) {
        const Bytes freed = held[{slot, id}];
        held.erase({slot, id});
        auto actions = send(event::Unloaded{{slot, 1}, UnloadReceipt{id, freed, freed, ++sequence[{slot, id}], 0, 0, {}}});
        const auto more = send(event::Dropped{{slot, 1}, id});
        actions.insert(actions.end(), more.begin(), more.end());
        return actions;
    }
    // Every owner carries out every command as it comes, freeing exactly what is asked;
    // `actions` and everything decided meanwhile, in order.
    std::vector<Action> answer_all(std::vector<Action> actions) {
        for (std::size_t next = 0; next < actions.size(); ++next) {
            std::vector<Action> more;
            if (const auto* d = std::get_if<action::SendDetach>(&actions[next])) {
                more = detach_and_answer(d->to.slot, d->command.model_id);
            } else if (const auto* p = std::get_if<action::SendPartialUnload>(&actions[next])) {
                more = free_and_answer(p->to.slot, p->command.model_id, p->command.bytes, p->command.bytes);
            }
            actions.insert(actions.end(), more.begin(), more.end());
        }
        return actions;
    }
};

template <class A>
std::vector<A> only(const std::vector<Action>& actions) {
    std::vector<A> found;
    for (const auto& a : actions) {
        if (const auto* x = std::get_if<A>(&a)) found.push_back(*x);
    }
    return found;
}

inline StandInUnload standin_of(std::uint32_t owner, std::uint64_t id, Bytes bytes, bool detach = false) {
    return StandInUnload{owner, 1, id, detach ? 0 : bytes, static_cast<std::uint8_t>(detach), {}};
}

}  // namespace comfy::arbiter::test
