#pragma once
// Which ledger row holds each model, by owner. A lookup is two hash probes, and an owner's
// death takes its whole map at once: erasing its thousands of entries one by one from a
// tree ordered by (slot, generation, model) cost a rebalance each, most of a death's time.
// (std::unordered_map: a flat open-addressing map would be faster still, but none is in the
// standard library or Debian's Boost 1.81 headers we use, and this is fast enough.)

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>

namespace comfy::arbiter {

class OwnerIndex {
public:
    std::optional<std::size_t> find(std::uint32_t slot, std::uint32_t generation, std::uint64_t model_id) const {
        const auto owner = by_owner_.find(slot);
        if (owner == by_owner_.end()) return std::nullopt;
        const auto found = owner->second.find({generation, model_id});
        if (found == owner->second.end()) return std::nullopt;
        return found->second;
    }

    // The model must not be in the index yet.
    void insert(std::uint32_t slot, std::uint32_t generation, std::uint64_t model_id, std::size_t row) {
        by_owner_[slot].emplace(Model{generation, model_id}, row);
        ++size_;
    }

    void erase(std::uint32_t slot, std::uint32_t generation, std::uint64_t model_id) {
        const auto owner = by_owner_.find(slot);
        if (owner == by_owner_.end()) return;
        size_ -= owner->second.erase({generation, model_id});
        if (owner->second.empty()) by_owner_.erase(owner);
    }

    // Calls `visit(row)` for every row of the owner in `slot`, all generations.
    template <class Visit>
    void for_each_row(std::uint32_t slot, Visit&& visit) const {
        const auto owner = by_owner_.find(slot);
        if (owner == by_owner_.end()) return;
        for (const auto& [model, row] : owner->second) visit(row);
    }

    // The same, and the owner leaves the index: its map goes whole.
    template <class Visit>
    void take_owner(std::uint32_t slot, Visit&& visit) {
        auto owner = by_owner_.extract(slot);
        if (owner.empty()) return;
        for (const auto& [model, row] : owner.mapped()) visit(row);
        size_ -= owner.mapped().size();
    }

    std::size_t size() const noexcept { return size_; }
    // The rows of the owner in `slot`, all generations.
    std::size_t size(std::uint32_t slot) const {
        const auto owner = by_owner_.find(slot);
        return owner == by_owner_.end() ? 0 : owner->second.size();
    }

private:
    struct Model {
        std::uint32_t generation;
        std::uint64_t model_id;
        bool operator==(const Model&) const = default;
    };
    struct ModelHash {
        std::size_t operator()(const Model& m) const noexcept {
            return std::hash<std::uint64_t>{}(m.model_id ^ (std::uint64_t{m.generation} << 48));
        }
    };
    std::unordered_map<std::uint32_t, std::unordered_map<Model, std::size_t, ModelHash>> by_owner_;
    std::size_t size_ = 0;
};

}  // namespace comfy::arbiter
