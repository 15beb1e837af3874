// A tensor in its frame, both ways (inline_tensors.hpp). Python's Encoder.tensor makes a
// dozen calls into torch and binascii for a tensor of a few hundred bytes, and Decoder.tensor
// as many back; here each side asks torch only what it must (its dtype, place and layout;
// frombuffer and view), reads or writes the bytes itself, and leaves any tensor it is not
// sure of to Python. The bytes an encoder reads are the tensor's own: contiguous on the
// CPU, numel() elements from data_ptr(), the tensor held for the whole read.
#include "worker/python_codec/inline_tensors.hpp"

#include "worker/python_codec/codec_common.hpp"

#include <cstdint>
#include <string>

namespace comfy::codec {
namespace {

struct Torch {
    PyObject* tensor_type = nullptr;
    PyObject* frombuffer = nullptr;
    PyObject* dtypes = nullptr;     // torch dtype -> (name, element size)
    PyObject* by_name = nullptr;    // name -> torch dtype
    PyObject* bool_dtype = nullptr;
    PyObject* strided = nullptr;    // torch.strided, the layout of a dense tensor
};
Torch torch;

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// base64 of `count` bytes, as binascii.b2a_base64(newline=False) writes it, as a str.
PyObject* base64(const unsigned char* bytes, Py_ssize_t count) {
    std::string out(static_cast<std::size_t>((count + 2) / 3 * 4), '=');
    char* to = out.data();
    Py_ssize_t at = 0;
    for (; at + 3 <= count; at += 3, to += 4) {
        const unsigned word = (unsigned{bytes[at]} << 16) | (unsigned{bytes[at + 1]} << 8) | bytes[at + 2];
        to[0] = kAlphabet[word >> 18];
        to[1] = kAlphabet[(word >> 12) & 63];
        to[2] = kAlphabet[(word >> 6) & 63];
        to[3] = kAlphabet[word & 63];
    }
    if (at < count) {
        const unsigned word = (unsigned{bytes[at]} << 16) | (at + 1 < count ? unsigned{bytes[at + 1]} << 8 : 0u);
        to[0] = kAlphabet[word >> 18];
        to[1] = kAlphabet[(word >> 12) & 63];
        if (at + 1 < count) to[2] = kAlphabet[(word >> 6) & 63];
    }
    return PyUnicode_DecodeASCII(out.data(), static_cast<Py_ssize_t>(out.size()), "strict");
}

// Each byte's value in the alphabet, 64 for any other byte.
struct Sextets {
    unsigned char of[256];
    constexpr Sextets() : of{} {
        for (unsigned char& value : of) value = 64;
        for (unsigned i = 0; i < 64; ++i) of[static_cast<unsigned char>(kAlphabet[i])] = static_cast<unsigned char>(i);
    }
};
constexpr Sextets kSextets;

int sextet(char c) {
    const unsigned char value = kSextets.of[static_cast<unsigned char>(c)];
    return value == 64 ? -1 : value;
}

// Canonical base64 of exactly `count` bytes into `out`; false for anything else (binascii's
// strict decoding, in Python, then says what is wrong with it).
bool unbase64(const char* text, Py_ssize_t length, Py_ssize_t count, unsigned char* out) {
    if (length % 4 != 0 || length / 4 * 3 - count < 0 || length / 4 * 3 - count > 2) return false;
    const Py_ssize_t padding = length / 4 * 3 - count;
    for (Py_ssize_t at = 0, written = 0; at < length; at += 4) {
        unsigned word = 0;
        for (Py_ssize_t i = 0; i < 4; ++i) {
            const bool pad = at + 4 == length && i >= 4 - padding;
            const int value = pad ? (text[at + i] == '=' ? 0 : -1) : sextet(text[at + i]);
            if (value < 0) return false;
            word = (word << 6) | static_cast<unsigned>(value);
        }
        for (int shift = 16; shift >= 0 && written < count; shift -= 8) {
            out[written++] = static_cast<unsigned char>(word >> shift);
        }
    }
    return true;
}

// The result of a call, or nullptr with no error where it raised an Exception (the Python
// path makes the same call and raises it as the reference does).
PyObject* quietly(PyObject* result) {
    if (result == nullptr && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
    return result;
}

// object.method() as 1 (True), 0 (False) or -1 (anything else, or it raised).
int answer(PyObject* object, PyObject* method) {
    PyObject* result = quietly(PyObject_CallMethodObjArgs(object, method, nullptr));
    const int said = result == Py_True ? 1 : result == Py_False ? 0 : -1;
    Py_XDECREF(result);
    return said;
}

// A failure of a fast path: an Exception is the Python path's to raise again (it makes the
// same calls), so it is dropped here; anything else (KeyboardInterrupt) stays raised.
PyObject* not_mine() {
    if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_Exception)) PyErr_Clear();
    return nullptr;
}

// {"$": "tensor", "dtype", "shape", "nbytes"} and then `rest`, in the Python encoder's order.
PyObject* tensor_tag(PyObject* name, PyObject* shape, long long nbytes) {
    PyObject* out = PyDict_New();
    PyObject* size = PyLong_FromLongLong(nbytes);
    if (out == nullptr || size == nullptr || PyDict_SetItem(out, names.tag, names.tensor) < 0 ||
        PyDict_SetItem(out, names.dtype, name) < 0 || PyDict_SetItem(out, names.shape, shape) < 0 ||
        PyDict_SetItem(out, names.nbytes, size) < 0) {
        Py_CLEAR(out);
    }
    Py_XDECREF(size);
    return out;
}

bool set(PyObject* dict, PyObject* key, PyObject* value) {  // takes `value`
    const bool ok = value != nullptr && PyDict_SetItem(dict, key, value) == 0;
    Py_XDECREF(value);
    return ok;
}

// The parts of a tensor the encoder needs, where it is one for the fast path.
struct Facts {
    PyObject* name = nullptr;  // borrowed from torch.dtypes
    long long element = 0;
    long long count = 0;
    std::uintptr_t address = 0;
};

bool read_facts(PyObject* tensor, long long inline_bytes, Facts* facts) {
    PyObject* dtype = PyObject_GetAttr(tensor, names.dtype);
    PyObject* known = dtype != nullptr ? PyDict_GetItemWithError(torch.dtypes, dtype) : nullptr;
    Py_XDECREF(dtype);
    if (known == nullptr) return false;
    facts->name = PyTuple_GetItem(known, 0);
    facts->element = PyLong_AsLongLong(PyTuple_GetItem(known, 1));
    PyObject* cpu = PyObject_GetAttr(tensor, names.is_cpu);
    PyObject* layout = PyObject_GetAttr(tensor, names.layout);
    const bool strided_cpu = cpu == Py_True && layout != nullptr && layout == torch.strided;
    Py_XDECREF(cpu);
    Py_XDECREF(layout);
    if (!strided_cpu || answer(tensor, names.is_contiguous) != 1 || answer(tensor, names.is_conj) != 0 ||
        answer(tensor, names.is_neg) != 0 || PyErr_Occurred()) {
        return false;
    }
    PyObject* count = quietly(PyObject_CallMethodObjArgs(tensor, names.numel, nullptr));
    facts->count = count != nullptr ? PyLong_AsLongLong(count) : 0;
    Py_XDECREF(count);
    if (PyErr_Occurred() || facts->count <= 0 || facts->count > inline_bytes / facts->element) return false;
    PyObject* address = quietly(PyObject_CallMethodObjArgs(tensor, names.data_ptr, nullptr));
    facts->address = address != nullptr ? reinterpret_cast<std::uintptr_t>(PyLong_AsVoidPtr(address)) : 0;
    Py_XDECREF(address);
    return !PyErr_Occurred() && facts->address != 0;
}

}  // namespace

PyObject* configure_torch(PyObject*, PyObject* args) {
    Torch given;
    if (!PyArg_ParseTuple(args, "OOO!O!OO:configure_torch", &given.tensor_type, &given.frombuffer, &PyDict_Type,
                          &given.dtypes, &PyDict_Type, &given.by_name, &given.bool_dtype, &given.strided)) {
        return nullptr;
    }
    for (PyObject* kept : {given.tensor_type, given.frombuffer, given.dtypes, given.by_name, given.bool_dtype,
                           given.strided}) {
        Py_INCREF(kept);
    }
    for (PyObject* old : {torch.tensor_type, torch.frombuffer, torch.dtypes, torch.by_name, torch.bool_dtype,
                          torch.strided}) {
        Py_XDECREF(old);
    }
    torch = given;
    Py_RETURN_NONE;
}

bool is_plain_tensor(PyObject* value) {
    return torch.tensor_type != nullptr && reinterpret_cast<PyObject*>(Py_TYPE(value)) == torch.tensor_type;
}

namespace {

PyObject* encode_fast(PyObject* encoder, PyObject* tensor, long long inline_bytes) {
    PyObject* written = PyObject_GetAttr(encoder, names.written);
    PyObject* id = PyLong_FromVoidPtr(tensor);
    const int seen = written != nullptr && id != nullptr && PyDict_Check(written) ? PyDict_Contains(written, id) : -1;
    Facts facts;
    PyObject* out = nullptr;
    if (seen == 0 && read_facts(tensor, inline_bytes, &facts)) {
        const long long nbytes = facts.count * facts.element;
        PyObject* shape_object = PyObject_GetAttr(tensor, names.shape);
        PyObject* shape = shape_object != nullptr ? PySequence_List(shape_object) : nullptr;
        Py_XDECREF(shape_object);
        PyObject* peer = shape != nullptr ? PyObject_GetAttr(encoder, names.peer) : nullptr;
        PyObject* theirs = peer == nullptr || peer == Py_None
                               ? nullptr
                               : PyObject_CallMethod(peer, "block_holding", "NL",
                                                     PyLong_FromVoidPtr(reinterpret_cast<void*>(facts.address)),
                                                     nbytes);
        out = peer != nullptr && (peer == Py_None || theirs != nullptr) ? tensor_tag(facts.name, shape, nbytes) : nullptr;
        if (out != nullptr && theirs != nullptr && theirs != Py_None) {  // lies in a block the peer lent us
            if (!PyTuple_Check(theirs) || PyTuple_Size(theirs) != 2 ||
                !set(out, names.yours, Py_NewRef(PyTuple_GetItem(theirs, 0))) ||
                !set(out, names.at, Py_NewRef(PyTuple_GetItem(theirs, 1)))) {
                Py_CLEAR(out);
            }
        } else if (out != nullptr) {
            PyObject* record = nullptr;
            if (!set(out, names.inline_, base64(reinterpret_cast<const unsigned char*>(facts.address), nbytes)) ||
                !set(out, names.n, PyLong_FromSsize_t(PyDict_Size(written))) ||
                (record = Py_BuildValue("(OO)", tensor, out)) == nullptr || PyDict_SetItem(written, id, record) < 0) {
                Py_CLEAR(out);
            }
            Py_XDECREF(record);
        }
        Py_XDECREF(shape);
        Py_XDECREF(peer);
        Py_XDECREF(theirs);
    }
    Py_XDECREF(written);
    Py_XDECREF(id);
    return out;
}

PyObject* build_fast(PyObject* decoder, PyObject* value) {
    for (PyObject* other : {names.yours, names.cuda_ipc, names.yours_cuda, names.strides, names.device}) {
        if (PyDict_Contains(value, other) != 0) return nullptr;
    }
    PyObject* text = PyDict_GetItemWithError(value, names.inline_);
    PyObject* number = PyDict_GetItemWithError(value, names.n);
    PyObject* name = PyDict_GetItemWithError(value, names.dtype);
    PyObject* shape = PyDict_GetItemWithError(value, names.shape);
    PyObject* size = PyDict_GetItemWithError(value, names.nbytes);
    PyObject* dtype = name != nullptr ? PyDict_GetItemWithError(torch.by_name, name) : nullptr;
    if (text == nullptr || number == nullptr || dtype == nullptr || shape == nullptr || size == nullptr ||
        !PyUnicode_Check(text)) {
        return nullptr;
    }
    PyObject* built = PyObject_GetAttr(decoder, names.built);
    PyObject* forms = built != nullptr ? PyObject_GetAttr(decoder, names.inline_forms) : nullptr;
    PyObject* key = forms != nullptr ? Py_BuildValue("(OO)", names.inline_, number) : nullptr;
    PyObject* result = nullptr;
    Py_ssize_t length = 0;
    const char* chars = key != nullptr && PyDict_Check(built) && PyDict_Check(forms) && PyDict_Contains(built, key) == 0
                            ? PyUnicode_AsUTF8AndSize(text, &length) : nullptr;
    const Py_ssize_t count = chars != nullptr ? PyLong_AsSsize_t(size) : -1;
    PyObject* bytes = count > 0 ? PyByteArray_FromStringAndSize(nullptr, count) : nullptr;
    unsigned char* raw = bytes != nullptr ? reinterpret_cast<unsigned char*>(PyByteArray_AsString(bytes)) : nullptr;
    bool fits = raw != nullptr && unbase64(chars, length, count, raw);
    for (Py_ssize_t at = 0; fits && dtype == torch.bool_dtype && at < count; ++at) fits = raw[at] <= 1;
    if (fits) {
        PyObject* same = Py_BuildValue("(OONO)", text, name, PySequence_Tuple(shape), Py_None);
        PyObject* flat = nullptr;
        PyObject* keywords = same != nullptr ? Py_BuildValue("{OO}", names.dtype, dtype) : nullptr;
        PyObject* positional = keywords != nullptr ? PyTuple_Pack(1, bytes) : nullptr;
        if (positional != nullptr && PyDict_SetItem(forms, number, same) == 0) {
            flat = PyObject_Call(torch.frombuffer, positional, keywords);
        }
        result = flat != nullptr ? PyObject_CallMethodObjArgs(flat, names.view, shape, nullptr) : nullptr;
        if (result != nullptr && PyDict_SetItem(built, key, result) < 0) Py_CLEAR(result);
        for (PyObject* done : {same, flat, keywords, positional}) Py_XDECREF(done);
    }
    for (PyObject* done : {built, forms, key, bytes}) Py_XDECREF(done);
    return result;
}

}  // namespace

PyObject* encode_inline(PyObject* encoder, PyObject* tensor, long long inline_bytes) {
    PyObject* out = encode_fast(encoder, tensor, inline_bytes);
    return out != nullptr ? out : not_mine();
}

PyObject* build_inline(PyObject* decoder, PyObject* value) {
    if (torch.tensor_type == nullptr) return nullptr;
    PyObject* out = build_fast(decoder, value);
    return out != nullptr ? out : not_mine();
}

}  // namespace comfy::codec
