#include "worker/python_codec/codec_common.hpp"

namespace comfy::codec {

Limits limits;
Names names;

bool make_names() {
    struct Entry {
        PyObject** slot;
        const char* text;
    };
    const Entry entries[] = {
        {&names.tag, "$"}, {&names.items, "items"}, {&names.tuple, "tuple"}, {&names.set, "set"},
        {&names.dict, "dict"}, {&names.tensor, "tensor"}, {&names.device, "device"}, {&names.dtype, "dtype"},
        {&names.type, "type"}, {&names.index, "index"}, {&names.name, "name"}, {&names.shape, "shape"},
        {&names.nbytes, "nbytes"}, {&names.offset, "offset"}, {&names.inline_, "inline"}, {&names.n, "n"},
        {&names.strides, "strides"}, {&names.yours, "yours"}, {&names.cuda_ipc, "cuda_ipc"},
        {&names.yours_cuda, "yours_cuda"}, {&names.at, "at"}, {&names.block, "block"}, {&names.capacity, "capacity"},
        {&names.peer, "peer"}, {&names.collect_one, "_collect"}, {&names.build_one, "_build"},
        {&names.encode_other, "encode_other"}, {&names.is_cpu, "is_cpu"}, {&names.layout, "layout"},
        {&names.is_contiguous, "is_contiguous"}, {&names.is_conj, "is_conj"}, {&names.is_neg, "is_neg"},
        {&names.numel, "numel"}, {&names.data_ptr, "data_ptr"}, {&names.written, "written"},
        {&names.built, "built"}, {&names.inline_forms, "inline_forms"},
        {&names.view, "view"}};
    for (const Entry& entry : entries) {
        *entry.slot = PyUnicode_InternFromString(entry.text);
        if (*entry.slot == nullptr) return false;
    }
    return true;
}

PyObject* clipped(PyObject* value, Py_ssize_t count) {
    PyObject* text = PyObject_Str(value);
    if (text == nullptr) return nullptr;
    const Py_ssize_t length = PyUnicode_GetLength(text);
    PyObject* clip = PyUnicode_Substring(text, 0, std::min(length, count));
    Py_DECREF(text);
    return clip;
}

PyObject* fail_clipped(const char* format, PyObject* value, Py_ssize_t count) {
    PyObject* clip = clipped(value, count);
    if (clip == nullptr) return nullptr;
    PyErr_Format(limits.error, format, clip);
    Py_DECREF(clip);
    return nullptr;
}

}  // namespace comfy::codec
