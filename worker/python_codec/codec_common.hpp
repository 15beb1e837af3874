#pragma once
// What the bridge codec's files share (bridge_codec.cpp): values.py's constants as
// configure() gives them, the names it looks up, interned once, and the small helpers every
// walk uses. One interpreter per process loads the module (ComfyUI's and a pack worker's
// are single-interpreter), so these are plain globals.

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <algorithm>

namespace comfy::codec {

// What configure() is given by values.py, so that its constants are written once.
struct Limits {
    PyObject* error = nullptr;          // ValueCrossingError
    PyObject* element_sizes = nullptr;  // dict: dtype name -> bytes of one element
    PyObject* dtype_names = nullptr;    // a tag "dtype" may name these (frozenset)
    PyObject* device_types = nullptr;   // a tag "device" may name these (frozenset)
    long long max_depth = 0;
    long long inline_bytes = 0;
    long long max_dimensions = 0;
    long long control_bytes = 0;
};
extern Limits limits;

// Interned names, made once at import (make_names).
struct Names {
    PyObject *tag, *items, *tuple, *set, *dict, *tensor, *device, *dtype, *type, *index, *name, *shape, *nbytes,
        *offset, *inline_, *n, *strides, *yours, *cuda_ipc, *yours_cuda, *at, *block, *capacity, *peer,
        *collect_one, *build_one, *encode_other, *is_cpu, *layout, *is_contiguous, *is_conj, *is_neg, *numel,
        *data_ptr, *written, *built, *inline_forms, *view;
};
extern Names names;

bool make_names();

// The exact types JSON carries as themselves (values.py's _PLAIN).
inline bool is_plain(PyObject* value) {
    return value == Py_None || PyBool_Check(value) || PyLong_CheckExact(value) || PyFloat_CheckExact(value) ||
           PyUnicode_CheckExact(value);
}

inline bool is_text(PyObject* value, PyObject* name) {
    return PyUnicode_CheckExact(value) && PyUnicode_Compare(value, name) == 0;
}

// Raises ValueCrossingError; always nullptr, for `return fail(...)`.
template <typename... Args>
PyObject* fail(const char* format, Args... args) {
    PyErr_Format(limits.error, format, args...);
    return nullptr;
}

// str(value)[:count], as the Python messages clip what a peer sent.
PyObject* clipped(PyObject* value, Py_ssize_t count);

// Raises ValueCrossingError with `format`'s one %R taking str(value)[:count].
PyObject* fail_clipped(const char* format, PyObject* value, Py_ssize_t count);

// dict.get(key), borrowed; nullptr with no error set when absent.
inline PyObject* member(PyObject* dict, PyObject* key) { return PyDict_GetItemWithError(dict, key); }

// An int's value when it is an exact int that fits in 64 bits.
inline bool small_int(PyObject* value, long long* out) {
    if (!PyLong_CheckExact(value)) return false;
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(value, &overflow);
    return overflow == 0 && !(*out == -1 && PyErr_Occurred());
}

}  // namespace comfy::codec
