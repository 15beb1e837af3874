#pragma once
// A node pack as the reference worker runs it: named nodes, each a list of steps that
// act on the device the way real nodes do (load a model, compute, pin host memory,
// drop a model), or wait for the rest of the machine (a test's ordering, never a timer). A compute step may leave a cast buffer and patch pins behind, held
// until a release frees them (worker/node_leftovers.hpp).

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace comfy::worker {

enum class StepKind { load_model, compute, pin, unpin, drop_model, await_free_below };

struct Step {
    StepKind kind;
    std::string model;        // load_model, drop_model
    std::uint64_t bytes = 0;  // load_model, pin, unpin, await_free_below
    std::uint32_t ms = 0;     // compute; await_free_below: how long at most
    std::uint64_t cast_buffer = 0;  // compute: device memory its cast buffer grows to
    std::uint64_t patch_pins = 0;   // compute: host memory pinned for weight patches
};

struct PackDescription {
    std::map<std::string, std::vector<Step>> nodes;
    std::uint64_t max_pinned_bytes = 0;  // the pack's MAX_PINNED_MEMORY; 0 for none
    // Whether the worker asks for release_node_boundary after each node (upstream's
    // executor resets cast buffers after every node); without it, what a node leaves is
    // held until the next prompt's cast_epoch_boundary.
    bool node_boundary_release = true;
};

// Reads a pack file; throws std::runtime_error with one line naming the file, the JSON
// path, what was expected and what was found.
PackDescription load_pack_description(const std::string& path);

}  // namespace comfy::worker
