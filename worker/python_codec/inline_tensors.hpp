#pragma once
// The bridge codec's fast path for a CPU tensor that crosses in its frame (values.py: at most
// INLINE_BYTES, in base64), both ways, for the walks of bridge_codec.cpp. Each function
// answers only the common case and leaves every other to values.py's Python, which then
// gives the reference's value or error: nullptr with no Python error set means "not mine".

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace comfy::codec {

// configure_torch(tensor_type, frombuffer, dtypes): torch's Tensor class, torch.frombuffer,
// and {torch dtype: (name, element size)} for the dtypes that cross. Until it is called,
// every tensor goes to Python.
PyObject* configure_torch(PyObject* module, PyObject* args);

// Whether `value` is a torch.Tensor itself (no subclass: a Parameter goes to Python).
bool is_plain_tensor(PyObject* value);

// Encoder.tensor of `tensor` for `encoder`, where it is contiguous on the CPU, of a dtype that
// crosses, of 1 to `inline_bytes` bytes, and not written in this value before: its frame
// form, or its "yours" form where the encoder's peer lent the bytes it lies in.
PyObject* encode_inline(PyObject* encoder, PyObject* tensor, long long inline_bytes);

// Decoder.tensor of a checked {"$": "tensor", ..., "inline"} for `decoder`, where it has no
// strides and no device, its base64 is canonical and its bytes are its size (a bool's 0 or 1).
PyObject* build_inline(PyObject* decoder, PyObject* value);

}  // namespace comfy::codec
