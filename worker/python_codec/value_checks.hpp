#pragma once
// Decoder.collect_blocks in C++ (values.py): a peer's value checked whole before anything is
// built from it: its nesting (MAX_DEPTH), its tags, and each tensor in the arena or in its
// frame (dtype, shape, size, offset within the arena, dense strides), each arena block it
// names gathered once. Where a check needs more than it knows (a tensor sent back or by CUDA
// IPC, by_value classes, enums, UUIDs, handles, a size past 64 bits, a type JSON does not
// make), the reference checks that one value, Decoder._collect, and its recursion comes
// back here through Decoder.collect_blocks.

#include "worker/python_codec/codec_common.hpp"

namespace comfy::codec {

struct Collect {
    PyObject* decoder;
    PyObject* blocks;   // dict: (kind, name) -> None, each block the value names, in order
    PyObject* extents;  // list of (offset, nbytes) of the arena blocks that hold bytes
};

// False with the error raised (ValueCrossingError for a malformed value).
bool collect(const Collect& at, PyObject* value, long long depth);

}  // namespace comfy::codec
