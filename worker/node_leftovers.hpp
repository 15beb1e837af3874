#pragma once
// What a worker holds between nodes, by the node that left it: the cast buffers a compute
// step leaves on the device and the host memory pinned for weight patches, as upstream's
// executor holds them until reset_cast_buffers. Each holding is tagged with its prompt
// epoch and node, so that each release frees exactly what upstream's would: the node
// boundary what that node left, the epoch boundary what earlier prompts left, a full
// release everything. Bookkeeping only: the caller moves the bytes on the device.

#include "shared/memory_arithmetic.hpp"

#include <cstdint>
#include <map>
#include <utility>

namespace comfy::worker {

class NodeLeftovers {
public:
    struct Held {
        Bytes cast = 0;  // device memory
        Bytes pins = 0;  // pinned host memory
        Held& operator+=(const Held& more) {
            cast += more.cast;
            pins += more.pins;
            return *this;
        }
    };

    // A cast buffer grows to the largest cast a node needed (it is reused, not stacked):
    // what node `node` of prompt `epoch` must add to hold at least `at_least`.
    Held growth(std::uint64_t epoch, std::uint32_t node, Held at_least) const;
    // Records `added` (what the device really gave) to that node's holding.
    void add(std::uint64_t epoch, std::uint32_t node, Held added);

    Held take_node(std::uint64_t epoch, std::uint32_t node);
    Held take_before(std::uint64_t epoch);
    Held take_all();
    // Whole cast buffers, oldest first, until `bytes` are freed or none is left; what was taken.
    Bytes take_cast(Bytes bytes);
    // Up to `bytes` of patch pins, oldest first.
    Bytes take_pins(Bytes bytes);

    Held total() const;

private:
    using Key = std::pair<std::uint64_t, std::uint32_t>;  // (prompt epoch, node index)
    std::map<Key, Held> held_;
};

}  // namespace comfy::worker
