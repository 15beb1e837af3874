#include "worker/python_codec/value_checks.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace comfy::codec {
namespace {

// What is not checked here is checked by the reference, Decoder._collect, for this one
// value; its recursion comes back here through Decoder.collect_blocks.
bool call_back(const Collect& at, PyObject* value, long long depth) {
    PyObject* depth_object = PyLong_FromLongLong(depth);
    if (depth_object == nullptr) return false;
    PyObject* result =
        PyObject_CallMethodObjArgs(at.decoder, names.collect_one, value, at.blocks, at.extents, depth_object, nullptr);
    Py_DECREF(depth_object);
    Py_XDECREF(result);
    return result != nullptr;
}

// _dense_strides: every element of `shape` once, from the block's start. `shape` is
// checked and its element count fits in 64 bits.
bool dense_strides(PyObject* shape, PyObject* strides) {
    if (!PyList_Check(strides) || PyList_Size(strides) != PyList_Size(shape)) return false;
    std::vector<std::pair<long long, long long>> laid;  // (stride, size) of the sizes over 1
    for (Py_ssize_t at = 0; at < PyList_Size(strides); ++at) {
        PyObject* stride = PyList_GetItem(strides, at);
        if (!PyLong_CheckExact(stride)) return false;
        int overflow = 0;
        long long value = PyLong_AsLongLongAndOverflow(stride, &overflow);
        if (overflow < 0 || (overflow == 0 && value < 0)) return false;
        if (overflow > 0) value = -1;  // larger than any element count: never dense below
        const long long size = PyLong_AsLongLong(PyList_GetItem(shape, at));
        if (size > 1) laid.emplace_back(value, size);
    }
    std::stable_sort(laid.begin(), laid.end(), [](auto a, auto b) {
        return static_cast<unsigned long long>(a.first) < static_cast<unsigned long long>(b.first);
    });
    long long expected = 1;
    for (const auto& [stride, size] : laid) {
        if (stride != expected) return false;
        expected *= size;
    }
    return true;
}

enum class Checked { ok, failed, to_python };

// Decoder.check_tensor for a tensor in the arena or in its frame; to_python where a size
// does not fit in 64 bits (the reference's big integers decide).
Checked check_tensor(const Collect& at, PyObject* value, bool in_frame, long long* offset, long long* nbytes) {
    PyObject* dtype = member(value, names.dtype);
    PyObject* shape = member(value, names.shape);
    PyObject* size_object = member(value, names.nbytes);
    if (PyErr_Occurred()) return Checked::failed;
    PyObject* element_size = dtype != nullptr && PyUnicode_CheckExact(dtype)
                                 ? PyDict_GetItemWithError(limits.element_sizes, dtype) : nullptr;
    if (element_size == nullptr) {
        if (!PyErr_Occurred()) fail_clipped("a tensor of unknown dtype %R", dtype ? dtype : Py_None, 40);
        return Checked::failed;
    }
    bool sizes = shape != nullptr && PyList_Check(shape) && PyList_Size(shape) <= limits.max_dimensions;
    unsigned long long count = 1;
    bool fits = true;
    for (Py_ssize_t i = 0; sizes && i < PyList_Size(shape); ++i) {
        PyObject* size = PyList_GetItem(shape, i);
        int overflow = 0;
        const long long value_of = PyLong_CheckExact(size) ? PyLong_AsLongLongAndOverflow(size, &overflow) : -1;
        sizes = PyLong_CheckExact(size) && overflow >= 0 && (overflow > 0 || value_of >= 0);
        fits = fits && overflow == 0 && !__builtin_mul_overflow(count, static_cast<unsigned long long>(value_of),
                                                                 &count);
    }
    if (!sizes) {
        fail("a tensor whose shape is not a list of sizes");
        return Checked::failed;
    }
    if (in_frame) {
        PyObject* text = member(value, names.inline_);
        PyObject* number = member(value, names.n);
        long long declared = 0;
        const bool whole = small_int(size_object ? size_object : Py_None, &declared) && declared > 0 &&
                           declared <= limits.inline_bytes && text != nullptr && PyUnicode_Check(text) &&
                           PyUnicode_GetLength(text) == (declared + 2) / 3 * 4 && number != nullptr &&
                           PyLong_CheckExact(number);
        if (!whole) {
            if (!PyErr_Occurred()) {
                fail("a tensor in its frame whose size is not its bytes' (at most %lld)", limits.inline_bytes);
            }
            return Checked::failed;
        }
        *offset = 0;
    } else {
        PyObject* offset_object = member(value, names.offset);
        if (offset_object == nullptr || !PyLong_CheckExact(offset_object) || size_object == nullptr ||
            !PyLong_CheckExact(size_object)) {
            if (!PyErr_Occurred()) fail("a tensor without its block's offset and size");
            return Checked::failed;
        }
        if (!small_int(offset_object, offset)) return PyErr_Occurred() ? Checked::failed : Checked::to_python;
    }
    if (!small_int(size_object, nbytes)) return PyErr_Occurred() ? Checked::failed : Checked::to_python;
    const unsigned long long element = PyLong_AsUnsignedLongLong(element_size);
    unsigned long long total = 0;
    if (!fits || __builtin_mul_overflow(count, element, &total)) return Checked::to_python;
    if (*nbytes < 0 || total != static_cast<unsigned long long>(*nbytes)) {
        PyErr_Format(limits.error, "a tensor of %U %S in a block of %S bytes", dtype, shape, size_object);
        return Checked::failed;
    }
    if (!in_frame && *nbytes != 0 && *offset < limits.control_bytes) {
        PyErr_Format(limits.error, "a tensor block of %lld bytes at %lld, outside the arena", *nbytes, *offset);
        return Checked::failed;
    }
    if (!in_frame && *nbytes != 0) {
        PyObject* peer = PyObject_GetAttr(at.decoder, names.peer);
        PyObject* capacity_object = peer != nullptr ? PyObject_GetAttr(peer, names.capacity) : nullptr;
        Py_XDECREF(peer);
        long long capacity = 0;
        const bool known = capacity_object != nullptr && small_int(capacity_object, &capacity);
        Py_XDECREF(capacity_object);
        if (!known) return PyErr_Occurred() ? Checked::failed : Checked::to_python;
        if (*offset > capacity - *nbytes) {
            PyErr_Format(limits.error, "a tensor block of %lld bytes at %lld, outside the arena", *nbytes, *offset);
            return Checked::failed;
        }
    }
    PyObject* strides = member(value, names.strides);
    if (strides != nullptr && !dense_strides(shape, strides)) {
        fail("a tensor whose strides do not lay its elements out densely in its block");
        return Checked::failed;
    }
    return PyErr_Occurred() ? Checked::failed : Checked::ok;
}

bool collect_tensor(const Collect& at, PyObject* value, long long depth) {
    for (PyObject* form : {names.yours, names.cuda_ipc, names.yours_cuda}) {
        const int found = PyDict_Contains(value, form);
        if (found < 0) return false;
        if (found) return call_back(at, value, depth);
    }
    const int in_frame = PyDict_Contains(value, names.inline_);
    if (in_frame < 0) return false;
    long long offset = 0, nbytes = 0;
    switch (check_tensor(at, value, in_frame != 0, &offset, &nbytes)) {
        case Checked::failed: return false;
        case Checked::to_python: return call_back(at, value, depth);
        case Checked::ok: break;
    }
    if (in_frame) return true;
    PyObject* key = Py_BuildValue("(OL)", names.block, offset);
    const int named = key != nullptr ? PyDict_Contains(at.blocks, key) : -1;
    bool ok = named >= 0;
    if (named == 0) {
        ok = PyDict_SetItem(at.blocks, key, Py_None) == 0;
        if (ok && nbytes != 0) {
            PyObject* extent = Py_BuildValue("(LL)", offset, nbytes);
            ok = extent != nullptr && PyList_Append(at.extents, extent) == 0;
            Py_XDECREF(extent);
        }
    }
    Py_XDECREF(key);
    return ok;
}

bool collect_items(const Collect& at, PyObject* value, PyObject* tag, long long depth) {
    PyObject* items = member(value, names.items);
    if (items == nullptr || !PyList_Check(items)) {
        if (!PyErr_Occurred()) PyErr_Format(limits.error, "a %U without its items", tag);
        return false;
    }
    const bool pairs = tag == names.dict || PyUnicode_Compare(tag, names.dict) == 0;
    for (Py_ssize_t i = 0; i < PyList_Size(items); ++i) {
        PyObject* item = PyList_GetItem(items, i);
        if (pairs && !(PyList_Check(item) && PyList_Size(item) == 2)) {
            fail("a dict item that is not a key and a value");
            return false;
        }
        if (!collect(at, item, depth + 1)) return false;
    }
    return true;
}

bool in_set(PyObject* value, PyObject* allowed) {
    return value != nullptr && PyUnicode_CheckExact(value) && PySet_Contains(allowed, value) == 1;
}

bool collect_tagged(const Collect& at, PyObject* value, PyObject* tag, long long depth) {
    if (is_text(tag, names.tensor)) return collect_tensor(at, value, depth);
    if (is_text(tag, names.set)) {
        PyObject* items = member(value, names.items);
        bool plain = items != nullptr && PyList_Check(items);
        for (Py_ssize_t i = 0; plain && i < PyList_Size(items); ++i) plain = is_plain(PyList_GetItem(items, i));
        if (!plain && !PyErr_Occurred()) fail("a set whose items are not plain values");
        return plain;
    }
    if (is_text(tag, names.tuple) || is_text(tag, names.dict)) return collect_items(at, value, tag, depth);
    if (is_text(tag, names.device)) {
        PyObject* type = member(value, names.type);
        PyObject* index = member(value, names.index);
        if (in_set(type, limits.device_types) && (index == nullptr || index == Py_None || PyLong_CheckExact(index))) {
            return true;
        }
        PyObject* shown_type = clipped(type ? type : Py_None, 20);
        PyObject* shown_index = clipped(index ? index : Py_None, 20);
        if (shown_type != nullptr && shown_index != nullptr) {
            PyErr_Format(limits.error, "a device %R %U", shown_type, shown_index);
        }
        Py_XDECREF(shown_type);
        Py_XDECREF(shown_index);
        return false;
    }
    if (is_text(tag, names.dtype)) {
        PyObject* name = member(value, names.name);
        if (in_set(name, limits.dtype_names)) return true;
        fail_clipped("a dtype %R", name ? name : Py_None, 40);
        return false;
    }
    return call_back(at, value, depth);  // value, enum, uuid, objects, an unknown tag
}

}  // namespace

bool collect(const Collect& at, PyObject* value, long long depth) {
    if (depth > limits.max_depth) {
        fail("a value nested deeper than %lld", limits.max_depth);
        return false;
    }
    if (PyList_CheckExact(value)) {
        for (Py_ssize_t i = 0; i < PyList_Size(value); ++i) {
            PyObject* item = PyList_GetItem(value, i);
            if (!is_plain(item) && !collect(at, item, depth + 1)) return false;
        }
        return true;
    }
    if (PyDict_CheckExact(value)) {
        PyObject* tag = member(value, names.tag);
        if (tag != nullptr && tag != Py_None) return collect_tagged(at, value, tag, depth);
        if (PyErr_Occurred()) return false;
        Py_ssize_t position = 0;
        PyObject *key, *item;
        while (PyDict_Next(value, &position, &key, &item)) {
            if (!collect(at, item, depth + 1)) return false;
        }
        return true;
    }
    if (value == Py_None || PyBool_Check(value) || PyLong_Check(value) || PyFloat_Check(value) ||
        PyUnicode_Check(value)) {
        return true;
    }
    return call_back(at, value, depth);  // not JSON's: the reference says so
}

}  // namespace comfy::codec
