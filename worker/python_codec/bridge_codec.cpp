// comfy_bridge_codec: the walk of the bridge's values (worker/python/comfy_supervisor/bridge/
// values.py) in C++, as a CPython extension module. Encoder.encode's walk of plain values,
// lists, tuples, dicts and sets into the JSON-ready structure; Decoder.collect_blocks' checks
// of a peer's value (tags, nesting, the arena's and the frame's tensors: dtype, shape, size,
// offset, strides; the blocks it names); Decoder.build's walk back. What must stay in Python
// is called back: a tensor's bytes, handles and remote objects, by_value classes, enums,
// UUIDs, CUDA lends (the Encoder's encode_other, the Decoder's _collect and _build for one
// value). values.py stays the reference: each function here gives what its Python twin
// gives, or raises the same ValueCrossingError (tests/fuzz/codec_compare.py checks it).
//
// Why the C API and not pybind11: the module is built once and loaded by every pack's
// interpreter, whatever its Python version, so it is built against the stable ABI
// (Py_LIMITED_API, an abi3 module); pybind11 cannot build against it. And what it does is
// little more than calls of the C API itself, where pybind11's wrappers would add a layer.
//
// Everything here comes from a peer (a decoded frame) or from the caller's own value:
// nothing is trusted. Nesting is bounded by MAX_DEPTH when checking and by
// Py_EnterRecursiveCall when encoding; sizes are checked in 64 bits, and a size that does
// not fit is left to the Python check (the reference's big integers).

#include "worker/python_codec/codec_common.hpp"
#include "worker/python_codec/inline_tensors.hpp"
#include "worker/python_codec/value_checks.hpp"

namespace {

using namespace comfy::codec;

// ---------------------------------------------------------------- encode

struct Encode {
    PyObject* encoder;
    PyObject* other;  // encoder.encode_other
};

PyObject* encode(PyObject* value, const Encode& to);

PyObject* encode_item(PyObject* item, const Encode& to) {
    if (is_plain(item)) {
        Py_INCREF(item);
        return item;
    }
    return encode(item, to);
}

// [encode_item(item) for item in value], in iteration order.
PyObject* encode_items(PyObject* value, const Encode& to) {
    PyObject* out = PyList_New(0);
    PyObject* iterator = out != nullptr ? PyObject_GetIter(value) : nullptr;
    if (iterator == nullptr) {
        Py_XDECREF(out);
        return nullptr;
    }
    while (PyObject* item = PyIter_Next(iterator)) {
        PyObject* encoded = encode_item(item, to);
        Py_DECREF(item);
        if (encoded == nullptr || PyList_Append(out, encoded) < 0) {
            Py_XDECREF(encoded);
            Py_DECREF(iterator);
            Py_DECREF(out);
            return nullptr;
        }
        Py_DECREF(encoded);
    }
    Py_DECREF(iterator);
    if (PyErr_Occurred()) {
        Py_DECREF(out);
        return nullptr;
    }
    return out;
}

// {"$": tag, "items": items}, taking `items`.
PyObject* tagged(PyObject* tag, PyObject* items) {
    if (items == nullptr) return nullptr;
    PyObject* out = PyDict_New();
    if (out == nullptr || PyDict_SetItem(out, names.tag, tag) < 0 || PyDict_SetItem(out, names.items, items) < 0) {
        Py_XDECREF(out);
        out = nullptr;
    }
    Py_DECREF(items);
    return out;
}

// A set whose items are all of the plain types, as {"$": "set", "items": list(value)};
// Py_None (borrowed, not an error) for any other set, which goes to encode_other.
PyObject* encode_set(PyObject* value) {
    PyObject* items = PySequence_List(value);
    if (items == nullptr) return nullptr;
    for (Py_ssize_t at = 0; at < PyList_Size(items); ++at) {
        if (!is_plain(PyList_GetItem(items, at))) {
            Py_DECREF(items);
            return Py_None;
        }
    }
    return tagged(names.set, items);
}

PyObject* encode_dict(PyObject* value, const Encode& to) {
    PyObject* pairs = PyMapping_Items(value);  // a subclass's own order (an OrderedDict's)
    if (pairs == nullptr) return nullptr;
    bool plain_keys = true;
    for (Py_ssize_t at = 0; at < PyList_Size(pairs) && plain_keys; ++at) {
        PyObject* key = PyTuple_GetItem(PyList_GetItem(pairs, at), 0);
        plain_keys = PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, "$") != 0;
    }
    PyObject* out = plain_keys ? PyDict_New() : PyList_New(0);
    for (Py_ssize_t at = 0; out != nullptr && at < PyList_Size(pairs); ++at) {
        PyObject* pair = PyList_GetItem(pairs, at);
        PyObject* key = PyTuple_GetItem(pair, 0);
        if (plain_keys) {
            PyObject* item = encode(PyTuple_GetItem(pair, 1), to);
            if (item == nullptr || PyDict_SetItem(out, key, item) < 0) Py_CLEAR(out);
            Py_XDECREF(item);
            continue;
        }
        PyObject* encoded_key = encode(key, to);
        PyObject* item = encoded_key != nullptr ? encode(PyTuple_GetItem(pair, 1), to) : nullptr;
        PyObject* entry = item != nullptr ? PyList_New(2) : nullptr;
        if (entry == nullptr) {
            Py_XDECREF(encoded_key);
            Py_XDECREF(item);
            Py_CLEAR(out);
            continue;
        }
        PyList_SetItem(entry, 0, encoded_key);  // steals
        PyList_SetItem(entry, 1, item);
        if (PyList_Append(out, entry) < 0) Py_CLEAR(out);
        Py_DECREF(entry);
    }
    Py_DECREF(pairs);
    return plain_keys || out == nullptr ? out : tagged(names.dict, out);
}

PyObject* encode_container(PyObject* value, const Encode& to) {
    if (PyList_Check(value)) return encode_items(value, to);
    if (PyTuple_Check(value)) return tagged(names.tuple, encode_items(value, to));
    if (PyAnySet_Check(value)) {
        PyObject* encoded = encode_set(value);
        if (encoded != Py_None) return encoded;
    } else if (PyDict_Check(value)) {
        return encode_dict(value, to);
    } else if (comfy::codec::is_plain_tensor(value)) {
        PyObject* encoded = comfy::codec::encode_inline(to.encoder, value, limits.inline_bytes);
        if (encoded != nullptr || PyErr_Occurred()) return encoded;
    }
    return PyObject_CallFunctionObjArgs(to.other, value, nullptr);
}

// Encoder.encode: the value as JSON carries it; the encoder's encode_other makes what is not
// a plain value, a container of them or a small tensor.
PyObject* encode(PyObject* value, const Encode& to) {
    if (value == Py_None || PyBool_Check(value) || PyUnicode_Check(value)) {
        Py_INCREF(value);
        return value;
    }
    if (PyLong_Check(value)) return PyNumber_Long(value);
    if (PyFloat_Check(value)) return PyNumber_Float(value);
    if (Py_EnterRecursiveCall(" while encoding a value that crosses")) return nullptr;
    PyObject* out = encode_container(value, to);
    Py_LeaveRecursiveCall();
    return out;
}

// ---------------------------------------------------------------- build

PyObject* build(PyObject* decoder, PyObject* value);

PyObject* build_item(PyObject* decoder, PyObject* item) {
    if (is_plain(item)) {
        Py_INCREF(item);
        return item;
    }
    return build(decoder, item);
}

PyObject* build_list(PyObject* decoder, PyObject* items) {
    PyObject* out = PyList_New(0);
    for (Py_ssize_t i = 0; out != nullptr && i < PyList_Size(items); ++i) {
        PyObject* item = build_item(decoder, PyList_GetItem(items, i));
        if (item == nullptr || PyList_Append(out, item) < 0) Py_CLEAR(out);
        Py_XDECREF(item);
    }
    return out;
}

PyObject* build_pairs(PyObject* decoder, PyObject* items) {
    PyObject* out = PyDict_New();
    for (Py_ssize_t i = 0; out != nullptr && i < PyList_Size(items); ++i) {
        PyObject* pair = PyList_GetItem(items, i);
        if (!PyList_Check(pair) || PyList_Size(pair) != 2) {  // collect() refused it already
            Py_CLEAR(out);
            return fail("a dict item that is not a key and a value");
        }
        PyObject* key = build(decoder, PyList_GetItem(pair, 0));
        if (key != nullptr && PyList_Check(key)) {
            Py_CLEAR(key);
            fail("a dict key that is a list");
        }
        PyObject* item = key != nullptr ? build(decoder, PyList_GetItem(pair, 1)) : nullptr;
        if (item == nullptr || PyDict_SetItem(out, key, item) < 0) Py_CLEAR(out);
        Py_XDECREF(key);
        Py_XDECREF(item);
    }
    return out;
}

PyObject* build_dict(PyObject* decoder, PyObject* value) {
    PyObject* tag = member(value, names.tag);
    if (tag == nullptr || tag == Py_None) {
        if (PyErr_Occurred()) return nullptr;
        PyObject* out = PyDict_New();
        Py_ssize_t position = 0;
        PyObject *key, *item;
        while (out != nullptr && PyDict_Next(value, &position, &key, &item)) {
            PyObject* built = build(decoder, item);
            if (built == nullptr || PyDict_SetItem(out, key, built) < 0) Py_CLEAR(out);
            Py_XDECREF(built);
        }
        return out;
    }
    PyObject* items = is_text(tag, names.tuple) || is_text(tag, names.dict) || is_text(tag, names.set)
                          ? member(value, names.items) : nullptr;
    if (is_text(tag, names.tensor) && PyDict_Contains(value, names.inline_) == 1) {
        PyObject* tensor = comfy::codec::build_inline(decoder, value);
        if (tensor != nullptr || PyErr_Occurred()) return tensor;
    }
    if (items == nullptr || !PyList_Check(items)) {  // objects, tensors...: the reference builds them
        return PyErr_Occurred() ? nullptr : PyObject_CallMethodObjArgs(decoder, names.build_one, value, nullptr);
    }
    if (is_text(tag, names.tuple)) {
        PyObject* list = build_list(decoder, items);
        PyObject* out = list != nullptr ? PyList_AsTuple(list) : nullptr;
        Py_XDECREF(list);
        return out;
    }
    if (is_text(tag, names.dict)) return build_pairs(decoder, items);
    return PySet_New(items);
}

// Decoder.build: the value of a checked one (collect() passed it).
PyObject* build(PyObject* decoder, PyObject* value) {
    if (PyList_CheckExact(value)) return build_list(decoder, value);
    if (PyList_Check(value) || (PyDict_Check(value) && !PyDict_CheckExact(value))) {  // not JSON's
        return PyObject_CallMethodObjArgs(decoder, names.build_one, value, nullptr);
    }
    if (!PyDict_CheckExact(value)) {
        Py_INCREF(value);
        return value;
    }
    if (Py_EnterRecursiveCall(" while building a value that crossed")) return nullptr;
    PyObject* out = build_dict(decoder, value);
    Py_LeaveRecursiveCall();
    return out;
}

// ---------------------------------------------------------------- the module

PyObject* py_encode(PyObject*, PyObject* args) {
    Encode to{};
    PyObject* value;
    if (!PyArg_ParseTuple(args, "OO:encode", &to.encoder, &value)) return nullptr;
    to.other = PyObject_GetAttr(to.encoder, names.encode_other);
    if (to.other == nullptr) return nullptr;
    PyObject* out = encode(value, to);
    Py_DECREF(to.other);
    return out;
}

PyObject* py_collect(PyObject*, PyObject* args) {
    Collect at{};
    PyObject* value;
    long long depth;
    if (!PyArg_ParseTuple(args, "OOO!O!L:collect", &at.decoder, &value, &PyDict_Type, &at.blocks, &PyList_Type,
                          &at.extents, &depth)) {
        return nullptr;
    }
    if (limits.error == nullptr) return PyErr_Format(PyExc_RuntimeError, "comfy_bridge_codec: configure() first");
    if (!collect(at, value, depth)) return nullptr;
    Py_RETURN_NONE;
}

PyObject* py_build(PyObject*, PyObject* args) {
    PyObject *decoder, *value;
    if (!PyArg_ParseTuple(args, "OO:build", &decoder, &value)) return nullptr;
    return build(decoder, value);
}

PyObject* py_configure(PyObject*, PyObject* args) {
    Limits given{};
    if (!PyArg_ParseTuple(args, "OO!O!O!LLLL:configure", &given.error, &PyDict_Type, &given.element_sizes,
                          &PyFrozenSet_Type, &given.dtype_names, &PyFrozenSet_Type, &given.device_types,
                          &given.max_depth, &given.inline_bytes, &given.max_dimensions, &given.control_bytes)) {
        return nullptr;
    }
    for (PyObject* kept : {given.error, given.element_sizes, given.dtype_names, given.device_types}) Py_INCREF(kept);
    for (PyObject* old : {limits.error, limits.element_sizes, limits.dtype_names, limits.device_types}) Py_XDECREF(old);
    limits = given;
    Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"configure", py_configure, METH_VARARGS,
     "configure(error, element_sizes, dtype_names, device_types, max_depth, inline_bytes, max_dimensions, "
     "control_bytes): values.py's constants"},
    {"configure_torch", comfy::codec::configure_torch, METH_VARARGS,
     "configure_torch(Tensor, frombuffer, {dtype: (name, size)}, {name: dtype}, torch.bool, torch.strided)"},
    {"encode", py_encode, METH_VARARGS, "encode(encoder, value): Encoder.encode's walk"},
    {"collect", py_collect, METH_VARARGS,
     "collect(decoder, value, blocks, extents, depth): Decoder.collect_blocks' checks"},
    {"build", py_build, METH_VARARGS, "build(decoder, value): Decoder.build's walk"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "comfy_bridge_codec",
                      "The bridge's value codec in C++ (worker/python_codec/bridge_codec.cpp)", -1, methods,
                      nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit_comfy_bridge_codec() {
    if (!make_names()) return nullptr;
    return PyModule_Create(&module);
}
