/* _bsk.c — the CPython extension over libbsk (linked statically). It takes any object that speaks
   DLPack (__dlpack__ / __dlpack_device__: torch tensors on CPU or CUDA, NumPy arrays, CuPy, ...) and
   hands its data pointer, shape and row stride straight to bsk_dense / bsk_bsr: no copies.
   Every argument is checked here first, with a message that names it, so that a bad call raises
   BSKError (carrying the bsk_status name and code) before anything is written; the library then checks
   again and its own status becomes the same exception. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bsk.h"
#include "bsk_dlpack.h"

#ifdef BSK_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

static PyObject *BSKError; /* RuntimeError subclass; instances carry .status, .code, .reason */

static const char *const status_names[] = {
    "BSK_SUCCESS",          "BSK_ERR_INVALID_ARGUMENT", "BSK_ERR_NULL_POINTER", "BSK_ERR_INVALID_BSR",
    "BSK_ERR_SHAPE_MISMATCH", "BSK_ERR_UNSUPPORTED",    "BSK_ERR_MISALIGNED",   "BSK_ERR_WRONG_LOCATION",
    "BSK_ERR_OVERFLOW",     "BSK_ERR_OUT_OF_MEMORY",    "BSK_ERR_NO_DEVICE",    "BSK_ERR_CUDA",
    "BSK_ERR_INTERNAL",     "BSK_ERR_BAD_LAYOUT",
};
#define N_STATUS ((int)(sizeof status_names / sizeof status_names[0]))

static const char *status_name(int s) { return s >= 0 && s < N_STATUS ? status_names[s] : "BSK_ERR_UNKNOWN"; }

/* A BSKError instance for status `code` and message `msg`. */
static PyObject *make_error_obj(int code, const char *msg)
{
    PyObject *text = PyUnicode_FromFormat("%s [%s: %s]", msg, status_name(code), bsk_status_string(code));
    if (!text) return NULL;
    PyObject *exc = PyObject_CallOneArg(BSKError, text);
    Py_DECREF(text);
    if (!exc) return NULL;
    PyObject *name = PyUnicode_FromString(status_name(code));
    PyObject *num = PyLong_FromLong(code);
    PyObject *reason = PyUnicode_FromString(bsk_status_string(code));
    int bad = !name || !num || !reason || PyObject_SetAttrString(exc, "status", name) ||
              PyObject_SetAttrString(exc, "code", num) || PyObject_SetAttrString(exc, "reason", reason);
    Py_XDECREF(name);
    Py_XDECREF(num);
    Py_XDECREF(reason);
    if (bad) { Py_DECREF(exc); return NULL; }
    return exc;
}

/* Raise BSKError for `code` with a printf-style message; returns NULL for `return fail(...)`. */
static PyObject *fail(int code, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    PyObject *exc = make_error_obj(code, msg);
    if (exc) {
        PyErr_SetObject(BSKError, exc);
        Py_DECREF(exc);
    }
    return NULL;
}

/* ---------------------------------------------------------------- DLPack views */

/* One borrowed tensor: the capsule is renamed "used_dltensor" as the protocol asks of a consumer, and
   view_release() calls the producer's deleter once the library is done with the memory. */
typedef struct {
    const char *name; /* argument name, for messages */
    PyObject *capsule;
    bsk_DLManagedTensor *mt;
    char *data;
    int ndim;
    const int64_t *shape;
    const int64_t *strides; /* NULL: compact row-major */
    int dev_type, dev_id;
    bsk_DLDataType dtype;
} view;

static void view_release(view *v)
{
    /* On an error path the BSKError is already set. The producer's deleter and capsule destructor may run Python
       code (a deleter written in Python is a ctypes callback), which must not see that exception pending: the
       callback would not run (the producer's memory leaks) and ctypes would clear the error, so that the call
       returned NULL with no exception. Nor may an exception they leave behind outlive them. */
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
#endif
    if (v->mt && v->mt->deleter) v->mt->deleter(v->mt);
    v->mt = NULL;
    Py_CLEAR(v->capsule);
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(type, value, tb);
#endif
}

static int is_device_type(int t) { return t == BSK_DL_CUDA || t == BSK_DL_CUDA_MANAGED; }

/* Borrow `obj` through DLPack. On CUDA, `dlpack_stream` (an int, or None to ask for nothing) is what
   __dlpack__ gets as its stream argument: the producer orders its pending work before that stream. */
static int view_get(view *v, PyObject *obj, const char *name, PyObject *dlpack_stream)
{
    memset(v, 0, sizeof *v);
    v->name = name;
    PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
    if (!dev) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError,
                         "%s: expected an array that speaks DLPack (torch.Tensor, numpy.ndarray, ...), got %.100s",
                         name, Py_TYPE(obj)->tp_name);
        }
        return -1;
    }
    int dt = 0, di = 0;
    /* PyArg_ParseTuple on anything but a tuple is a SystemError, not the caller's TypeError */
    int ok = PyTuple_Check(dev) && PyArg_ParseTuple(dev, "ii", &dt, &di);
    if (!ok && !PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "%s: __dlpack_device__() must return a tuple (device_type, device_id), got %.100s",
                     name, Py_TYPE(dev)->tp_name);
    Py_DECREF(dev);
    if (!ok) return -1;

    PyObject *cap;
    if (is_device_type(dt) && dlpack_stream && dlpack_stream != Py_None) {
        PyObject *meth = PyObject_GetAttrString(obj, "__dlpack__");
        if (!meth) return -1;
        PyObject *args = PyTuple_New(0), *kw = Py_BuildValue("{sO}", "stream", dlpack_stream);
        cap = args && kw ? PyObject_Call(meth, args, kw) : NULL;
        Py_XDECREF(args);
        Py_XDECREF(kw);
        Py_DECREF(meth);
    } else {
        cap = PyObject_CallMethod(obj, "__dlpack__", NULL);
    }
    if (!cap) return -1;
    bsk_DLManagedTensor *mt = (bsk_DLManagedTensor *)PyCapsule_GetPointer(cap, "dltensor");
    if (!mt) { Py_DECREF(cap); return -1; }
    if (PyCapsule_SetName(cap, "used_dltensor")) { Py_DECREF(cap); return -1; }
    v->capsule = cap;
    v->mt = mt;
    const bsk_DLTensor *t = &mt->dl_tensor;
    v->data = t->data ? (char *)t->data + t->byte_offset : NULL;
    v->ndim = t->ndim;
    v->shape = t->shape;
    v->strides = t->strides;
    v->dev_type = t->device.device_type;
    v->dev_id = t->device.device_id;
    v->dtype = t->dtype;
    return 0;
}

static const char *dtype_text(bsk_DLDataType d, char *buf, size_t n)
{
    const char *base;
    switch (d.code) {
    case BSK_DL_INT: base = "int"; break;
    case BSK_DL_UINT: base = "uint"; break;
    case BSK_DL_FLOAT: base = "float"; break;
    case BSK_DL_BFLOAT: base = "bfloat"; break;
    case BSK_DL_COMPLEX: base = "complex"; break;
    case BSK_DL_BOOL: base = "bool"; break;
    default: base = "opaque"; break;
    }
    if (d.lanes != 1) snprintf(buf, n, "%s%dx%d", base, d.bits, d.lanes);
    else snprintf(buf, n, "%s%d", base, d.bits);
    return buf;
}

static const char *device_text(int type, int id, char *buf, size_t n)
{
    switch (type) {
    case BSK_DL_CPU: snprintf(buf, n, "cpu"); break;
    case BSK_DL_CUDA: snprintf(buf, n, "cuda:%d", id); break;
    case BSK_DL_CUDA_HOST: snprintf(buf, n, "cuda pinned host memory"); break;
    case BSK_DL_CUDA_MANAGED: snprintf(buf, n, "cuda managed memory (device %d)", id); break;
    default: snprintf(buf, n, "DLPack device type %d", type); break;
    }
    return buf;
}

static int float_dtype(const view *v, bsk_dtype *out)
{
    if (v->dtype.lanes == 1) {
        if (v->dtype.code == BSK_DL_FLOAT && v->dtype.bits == 32) { *out = BSK_F32; return 0; }
        if (v->dtype.code == BSK_DL_FLOAT && v->dtype.bits == 16) { *out = BSK_F16; return 0; }
        if (v->dtype.code == BSK_DL_BFLOAT && v->dtype.bits == 16) { *out = BSK_BF16; return 0; }
    }
    char b[32];
    fail(BSK_ERR_UNSUPPORTED, "%s has dtype %s; BSK takes float32, float16 or bfloat16", v->name,
         dtype_text(v->dtype, b, sizeof b));
    return -1;
}

/* All operands must sit in one place: host (CPU or pinned) or one CUDA device. */
static int same_place(view *const *vs, int n, bsk_memory *mem, int *dev_id)
{
    for (int i = 0; i < n; i++) {
        int t = vs[i]->dev_type;
        if (t != BSK_DL_CPU && t != BSK_DL_CUDA_HOST && !is_device_type(t)) {
            char b[64];
            fail(BSK_ERR_UNSUPPORTED, "%s is on %s; BSK takes host memory or CUDA device memory", vs[i]->name,
                 device_text(t, vs[i]->dev_id, b, sizeof b));
            return -1;
        }
    }
    for (int i = 1; i < n; i++) {
        int d0 = is_device_type(vs[0]->dev_type), di = is_device_type(vs[i]->dev_type);
        if (d0 != di || (d0 && vs[0]->dev_id != vs[i]->dev_id)) {
            char b0[64], b1[64];
            fail(BSK_ERR_WRONG_LOCATION, "operands are on different devices: %s is on %s, %s is on %s", vs[0]->name,
                 device_text(vs[0]->dev_type, vs[0]->dev_id, b0, sizeof b0), vs[i]->name,
                 device_text(vs[i]->dev_type, vs[i]->dev_id, b1, sizeof b1));
            return -1;
        }
    }
    *mem = is_device_type(vs[0]->dev_type) ? BSK_MEM_DEVICE : BSK_MEM_HOST;
    *dev_id = vs[0]->dev_id;
    return 0;
}

/* A 2-D row-major view as a bsk_dense: rows must be contiguous (inner stride 1); ld is the row stride. */
static int as_dense(const view *v, bsk_memory mem, bsk_dense *d)
{
    if (v->ndim != 2) {
        fail(BSK_ERR_SHAPE_MISMATCH, "%s must be a 2-D matrix, got %d dimensions", v->name, v->ndim);
        return -1;
    }
    if (float_dtype(v, &d->dtype)) return -1;
    int64_t rows = v->shape[0], cols = v->shape[1], ld = cols;
    if (v->strides) {
        int64_t s0 = v->strides[0], s1 = v->strides[1];
        if (cols > 1 && s1 != 1) {
            fail(BSK_ERR_BAD_LAYOUT,
                 "%s has inner stride %lld (shape %lldx%lld, strides (%lld, %lld)); BSK reads each row as "
                 "contiguous memory: pass a row-major tensor (.contiguous())",
                 v->name, (long long)s1, (long long)rows, (long long)cols, (long long)s0, (long long)s1);
            return -1;
        }
        if (rows > 1) {
            if (s0 < cols) {
                fail(BSK_ERR_BAD_LAYOUT,
                     "%s has row stride %lld < %lld columns (a transposed or overlapping view); pass a "
                     "row-major tensor (.contiguous())",
                     v->name, (long long)s0, (long long)cols);
                return -1;
            }
            ld = s0;
        }
    }
    d->rows = rows;
    d->cols = cols;
    d->ld = ld;
    d->mem = mem;
    d->data = v->data;
    return 0;
}

/* Sizes from Python ints are multiplied here before libbsk has checked them: the products must not wrap (undefined
   behaviour, and a wrapped count is one that some array's length may match). bsk.h: past the limits,
   BSK_ERR_OVERFLOW, never a wrapped size; its limit for rows, cols and sequence lengths is 2^31-1. */
#define SIZE_LIMIT ((int64_t)INT32_MAX)
static int64_t cdiv(int64_t a, int64_t b) { return a / b + (a % b != 0); } /* a >= 0, b >= 1: no a + b - 1 */
static int64_t mul_size(int64_t a, int64_t b) /* a * b of sizes; -1 for a negative one or past INT64_MAX */
{
    return a < 0 || b < 0 || (a > 0 && b > INT64_MAX / a) ? -1 : a * b;
}

static int is_compact(const view *v)
{
    if (!v->strides) return 1;
    /* An empty array holds no memory to read or write: its strides say nothing (torch gives a dimension after
       a size-0 one the stride it would have with size 1, e.g. [2, 2, 0] has strides (2, 1, 1)). */
    for (int i = 0; i < v->ndim; i++)
        if (v->shape[i] == 0) return 1;
    int64_t expect = 1;
    for (int i = v->ndim - 1; i >= 0; i--) {
        if (v->shape[i] != 1 && v->strides[i] != expect) return 0;
        expect *= v->shape[i];
    }
    return 1;
}

static int index_vector(const view *v, int64_t want_len, const char *why)
{
    char b[32];
    if (v->ndim != 1) {
        fail(BSK_ERR_SHAPE_MISMATCH, "%s must be 1-D, got %d dimensions", v->name, v->ndim);
        return -1;
    }
    if (v->dtype.code != BSK_DL_INT || v->dtype.bits != 32 || v->dtype.lanes != 1) {
        fail(BSK_ERR_UNSUPPORTED,
             "%s has dtype %s; BSK indices are int32 (bsk.BSRMatrix converts torch's int64 indices once)", v->name,
             dtype_text(v->dtype, b, sizeof b));
        return -1;
    }
    if (!is_compact(v)) {
        fail(BSK_ERR_BAD_LAYOUT, "%s must be contiguous, its stride is %lld", v->name, (long long)v->strides[0]);
        return -1;
    }
    if (v->shape[0] != want_len) {
        fail(BSK_ERR_SHAPE_MISMATCH, "%s has %lld entries, expected %lld (%s)", v->name, (long long)v->shape[0],
             (long long)want_len, why);
        return -1;
    }
    return 0;
}

/* row_ptr [mb+1] int32, col_idx [nnzb] int32, values [nnzb, br, bc] contiguous, of a rows x cols matrix. */
static int as_bsr(const view *rp, const view *ci, const view *val, long long rows, long long cols, bsk_memory mem,
                  bsk_bsr *A)
{
    if (val->ndim != 3) {
        fail(BSK_ERR_SHAPE_MISMATCH, "%s must be 3-D [nnzb, block_rows, block_cols], got %d dimensions", val->name,
             val->ndim);
        return -1;
    }
    if (float_dtype(val, &A->dtype)) return -1;
    if (!is_compact(val)) {
        fail(BSK_ERR_BAD_LAYOUT, "%s must be contiguous [nnzb, block_rows, block_cols]", val->name);
        return -1;
    }
    int64_t nnzb = val->shape[0], br = val->shape[1], bc = val->shape[2];
    if (br < 1 || bc < 1 || br > 1024 || bc > 1024) {
        fail(BSK_ERR_INVALID_ARGUMENT, "block size %lldx%lld is out of range (1..1024)", (long long)br, (long long)bc);
        return -1;
    }
    if (rows < 0 || cols < 0) {
        fail(BSK_ERR_INVALID_ARGUMENT, "matrix shape %lldx%lld is negative", rows, cols);
        return -1;
    }
    if (rows > SIZE_LIMIT || cols > SIZE_LIMIT) {
        fail(BSK_ERR_OVERFLOW, "matrix shape %lldx%lld is past the limit of 2147483647 rows and columns", rows, cols);
        return -1;
    }
    int64_t mb = cdiv(rows, br);
    char why[160];
    snprintf(why, sizeof why, "a %lldx%lld matrix in %lldx%lld blocks has %lld block rows", rows, cols, (long long)br,
             (long long)bc, (long long)mb);
    if (index_vector(rp, mb + 1, why)) return -1;
    if (index_vector(ci, nnzb, "one block column per block in values")) return -1;
    A->rows = rows;
    A->cols = cols;
    A->block_rows = (int32_t)br;
    A->block_cols = (int32_t)bc;
    A->nnzb = nnzb;
    A->row_ptr = (int32_t *)rp->data;
    A->col_idx = (int32_t *)ci->data;
    A->values = val->data;
    A->mem = mem;
    return 0;
}

/* ---------------------------------------------------------------- context */

typedef struct {
    PyObject_HEAD
    bsk_context *ctx;
} ContextObject;

static int Context_init(ContextObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"backend", NULL};
    int backend = BSK_BACKEND_AUTO;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|i", kwlist, &backend)) return -1;
    if (self->ctx) return 0;
    bsk_status s = bsk_create(&self->ctx, (bsk_backend)backend);
    if (s) { fail(s, "bsk_create(backend=%d) failed", backend); return -1; }
    return 0;
}

static void Context_dealloc(ContextObject *self)
{
    if (self->ctx) {
        /* The last stream may belong to the caller and be gone by now: wait on the default one. */
        bsk_set_stream(self->ctx, NULL);
        bsk_destroy(self->ctx);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* f(ctx) with the GIL released (it may wait for the device); a failure raises "<what> failed". */
static PyObject *Context_run(ContextObject *self, bsk_status (*f)(bsk_context *), const char *what)
{
    bsk_status s;
    Py_BEGIN_ALLOW_THREADS
    s = f(self->ctx);
    Py_END_ALLOW_THREADS
    if (s) return fail(s, "%s failed", what);
    Py_RETURN_NONE;
}
static PyObject *Context_synchronize(ContextObject *self, PyObject *Py_UNUSED(ignored))
{
    return Context_run(self, bsk_synchronize, "synchronize");
}

static PyObject *Context_last_kernel(ContextObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(bsk_last_kernel(self->ctx));
}

static PyObject *Context_has_device(ContextObject *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(bsk_has_device(self->ctx));
}

/* The autotuner's table of this context (bsk_tune_load / bsk_tune_save / bsk_tune_clear). */
static PyObject *Context_tune_file(ContextObject *self, PyObject *arg, int save)
{
    PyObject *bytes = NULL;
    if (!PyUnicode_FSConverter(arg, &bytes)) return NULL;
    const char *path = PyBytes_AS_STRING(bytes);
    bsk_status s = save ? bsk_tune_save(self->ctx, path) : bsk_tune_load(self->ctx, path);
    PyObject *ret = s ? fail(s, "%s %s failed", save ? "tune_save" : "tune_load", path) : Py_NewRef(Py_None);
    Py_DECREF(bytes);
    return ret;
}
static PyObject *Context_tune_load(ContextObject *self, PyObject *arg) { return Context_tune_file(self, arg, 0); }
static PyObject *Context_tune_save(ContextObject *self, PyObject *arg) { return Context_tune_file(self, arg, 1); }
static PyObject *Context_tune_clear(ContextObject *self, PyObject *Py_UNUSED(ignored))
{
    bsk_tune_clear(self->ctx);
    Py_RETURN_NONE;
}
static PyObject *Context_tune_entries(ContextObject *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(bsk_tune_entries(self->ctx));
}

/* The pattern cache of this context (bsk_set_pattern_cache / bsk_forget_patterns). */
static PyObject *Context_set_pattern_cache(ContextObject *self, PyObject *arg)
{
    const int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    bsk_status s;
    Py_BEGIN_ALLOW_THREADS /* turning it off drops the entries: waits for the work that used them */
    s = bsk_set_pattern_cache(self->ctx, on);
    Py_END_ALLOW_THREADS
    if (s) return fail(s, "set_pattern_cache failed");
    Py_RETURN_NONE;
}
static PyObject *Context_forget_patterns(ContextObject *self, PyObject *Py_UNUSED(ignored))
{
    return Context_run(self, bsk_forget_patterns, "forget_patterns");
}

static PyMethodDef Context_methods[] = {
    {"synchronize", (PyCFunction)Context_synchronize, METH_NOARGS,
     "Wait for the work this context queued (reports asynchronous CUDA errors)."},
    {"set_pattern_cache", (PyCFunction)Context_set_pattern_cache, METH_O,
     "set_pattern_cache(on): keep data derived from each BSR pattern between calls (bsk_set_pattern_cache)."},
    {"forget_patterns", (PyCFunction)Context_forget_patterns, METH_NOARGS,
     "Drop every cached pattern entry (bsk_forget_patterns; waits for the work that used them)."},
    {"tune_load", (PyCFunction)Context_tune_load, METH_O,
     "tune_load(path): replace the autotuner's table with a tune file's (bsk_tune_load; nothing changes on error)."},
    {"tune_save", (PyCFunction)Context_tune_save, METH_O, "tune_save(path): write the autotuner's table (bsk_tune_save)."},
    {"tune_clear", (PyCFunction)Context_tune_clear, METH_NOARGS, "Empty the autotuner's table (bsk_tune_clear)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Context_getset[] = {
    {"last_kernel", (getter)Context_last_kernel, NULL, "Kernel the last spmm/sddmm on this context ran.", NULL},
    {"has_device", (getter)Context_has_device, NULL, "Whether this context can run on a CUDA device.", NULL},
    {"tune_entries", (getter)Context_tune_entries, NULL, "Case classes in the autotuner's table.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ContextType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "blackwellsparsek._bsk.Context",
    .tp_basicsize = sizeof(ContextObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A bsk_context: backend choice, CUDA stream, workspace and pattern caches. One per thread and "
              "device (not thread-safe).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Context_init,
    .tp_dealloc = (destructor)Context_dealloc,
    .tp_methods = Context_methods,
    .tp_getset = Context_getset,
};

static bsk_context *context_of(PyObject *o)
{
    if (!PyObject_TypeCheck(o, &ContextType) || !((ContextObject *)o)->ctx) {
        PyErr_SetString(PyExc_TypeError, "ctx must be an initialised blackwellsparsek._bsk.Context");
        return NULL;
    }
    return ((ContextObject *)o)->ctx;
}

/* Point the context (and this runtime's current device) at the operands' device and stream. */
static bsk_status prepare_device(bsk_context *ctx, bsk_memory mem, int dev_id, void *stream)
{
    if (mem != BSK_MEM_DEVICE) return BSK_SUCCESS;
#ifdef BSK_WITH_CUDA
    /* The library's CUDA runtime is its own static copy: its current device is not the caller's. */
    if (cudaSetDevice(dev_id) != cudaSuccess) {
        (void)cudaGetLastError();
        return BSK_ERR_NO_DEVICE;
    }
#else
    (void)dev_id;
#endif
    return bsk_set_stream(ctx, stream);
}

static PyObject *status_error(const char *what, bsk_status s)
{
#ifdef BSK_WITH_CUDA
    if (s == BSK_ERR_CUDA) {
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return fail(s, "%s failed: %s", what, cudaGetErrorString(e));
    }
    return fail(s, "%s failed", what);
#else
    if (s == BSK_ERR_NO_DEVICE)
        return fail(s, "%s failed: this blackwellsparsek was built without CUDA (no nvcc at install time)", what);
    return fail(s, "%s failed", what);
#endif
}

static int stream_arg(PyObject *o, void **stream)
{
    *stream = NULL;
    if (!o || o == Py_None) return 0;
    *stream = PyLong_AsVoidPtr(o);
    return *stream == NULL && PyErr_Occurred() ? -1 : 0;
}

/* ---------------------------------------------------------------- operations */

static const char spmm_doc[] =
    "spmm(ctx, op, alpha, row_ptr, col_idx, values, rows, cols, B, beta, C, stream=0, dlpack_stream=None)\n"
    "C = alpha * op(A) @ B + beta * C in place, A the rows x cols BSR matrix (row_ptr, col_idx, values).\n"
    "op: 0 = A, 1 = A transposed. stream: the cudaStream_t (int) to run on for device operands.\n"
    "dlpack_stream: passed to each CUDA operand's __dlpack__(stream=...) (None: not passed).";

/* spmm and spmm_tune: the same operands; tune > 0 times every kernel family (bsk_tune_spmm, `tune` timed runs each)
   and returns (family, kernel, ms, default_kernel, default_ms) instead of None. */
static PyObject *spmm_call(PyObject *args, PyObject *kw, int tune)
{
    static char *kwlist[] = {"ctx", "op", "alpha", "row_ptr", "col_idx", "values", "rows", "cols",
                             "B", "beta", "C", "stream", "dlpack_stream", NULL};
    static char *kwlist_t[] = {"ctx", "op", "alpha", "row_ptr", "col_idx", "values", "rows", "cols",
                               "B", "beta", "C", "iters", "stream", "dlpack_stream", NULL};
    PyObject *octx, *orp, *oci, *oval, *oB, *oC, *ostream = NULL, *odl = Py_None;
    int op, iters = 10;
    double alpha, beta;
    long long rows, cols;
    if (!tune ? !PyArg_ParseTupleAndKeywords(args, kw, "OidOOOLLOdO|OO:spmm", kwlist, &octx, &op, &alpha, &orp, &oci,
                                             &oval, &rows, &cols, &oB, &beta, &oC, &ostream, &odl)
              : !PyArg_ParseTupleAndKeywords(args, kw, "OidOOOLLOdO|iOO:spmm_tune", kwlist_t, &octx, &op, &alpha, &orp,
                                             &oci, &oval, &rows, &cols, &oB, &beta, &oC, &iters, &ostream, &odl))
        return NULL;
    bsk_context *ctx = context_of(octx);
    void *stream;
    if (!ctx || stream_arg(ostream, &stream)) return NULL;
    if (op != BSK_OP_N && op != BSK_OP_T) return fail(BSK_ERR_INVALID_ARGUMENT, "spmm: op must be 0 (N) or 1 (T)");

    view rp, ci, val, B, C;
    view *all[] = {&val, &rp, &ci, &B, &C};
    for (int i = 0; i < 5; i++) memset(all[i], 0, sizeof(view));
    PyObject *ret = NULL;
    if (view_get(&val, oval, "A.values", odl) || view_get(&rp, orp, "A.row_ptr", odl) ||
        view_get(&ci, oci, "A.col_idx", odl) || view_get(&B, oB, "B", odl) || view_get(&C, oC, "C", odl))
        goto done;
    bsk_memory mem;
    int dev;
    bsk_bsr A;
    bsk_dense dB, dC;
    if (same_place(all, 5, &mem, &dev) || as_bsr(&rp, &ci, &val, rows, cols, mem, &A) || as_dense(&B, mem, &dB) ||
        as_dense(&C, mem, &dC))
        goto done;
    {
        char b0[32], b1[32];
        if (A.dtype != dB.dtype) {
            fail(BSK_ERR_UNSUPPORTED, "spmm: A (%s) and B (%s) must have the same dtype",
                 dtype_text(val.dtype, b0, sizeof b0), dtype_text(B.dtype, b1, sizeof b1));
            goto done;
        }
        long long m = op == BSK_OP_N ? rows : cols, k = op == BSK_OP_N ? cols : rows;
        if (dB.rows != k) {
            fail(BSK_ERR_SHAPE_MISMATCH, "spmm: op(A) is %lldx%lld but B has %lld rows (needs %lld)", m, k,
                 (long long)dB.rows, k);
            goto done;
        }
        if (dC.rows != m || dC.cols != dB.cols) {
            fail(BSK_ERR_SHAPE_MISMATCH, "spmm: C is %lldx%lld, op(A) @ B is %lldx%lld", (long long)dC.rows,
                 (long long)dC.cols, m, (long long)dB.cols);
            goto done;
        }
    }
    bsk_status s;
    bsk_tune_result r;
    Py_BEGIN_ALLOW_THREADS
    s = prepare_device(ctx, mem, dev, stream);
    if (!s && tune) s = bsk_tune_spmm(ctx, (bsk_op)op, (float)alpha, &A, &dB, (float)beta, &dC, iters, &r);
    else if (!s) s = bsk_spmm(ctx, (bsk_op)op, (float)alpha, &A, &dB, (float)beta, &dC);
    Py_END_ALLOW_THREADS
    if (s) { status_error(tune ? "spmm_tune" : "spmm", s); goto done; }
    ret = tune ? Py_BuildValue("(ssdsd)", r.family, r.kernel, r.ms, r.default_kernel, r.default_ms) : Py_NewRef(Py_None);
done:
    for (int i = 0; i < 5; i++) view_release(all[i]);
    return ret;
}

static PyObject *py_spmm(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw) { return spmm_call(args, kw, 0); }

static const char spmm_tune_doc[] =
    "spmm_tune(ctx, op, alpha, row_ptr, col_idx, values, rows, cols, B, beta, C, iters=10, stream=0,\n"
    "dlpack_stream=None) -> (family, kernel, ms, default_kernel, default_ms)\n"
    "bsk_tune_spmm: times every kernel family that takes the case (iters timed runs each, median), records the\n"
    "fastest in ctx's table for the case's class, and leaves C = alpha * op(A) @ B + beta * C as spmm would.\n"
    "Host operands: one CPU kernel, nothing recorded (family 'cpu').";

static PyObject *py_spmm_tune(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw) { return spmm_call(args, kw, 1); }

static const char sddmm_doc[] =
    "sddmm(ctx, alpha, X, Y, beta, row_ptr, col_idx, values, rows, cols, stream=0, dlpack_stream=None)\n"
    "values = alpha * (X @ Y^T) sampled on the rows x cols BSR pattern (row_ptr, col_idx) + beta * values,\n"
    "in place. X: rows x D, Y: cols x D, values [nnzb, br, bc] of float32 or X's dtype.";

static PyObject *py_sddmm(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"ctx", "alpha", "X", "Y", "beta", "row_ptr", "col_idx", "values",
                             "rows", "cols", "stream", "dlpack_stream", NULL};
    PyObject *octx, *oX, *oY, *orp, *oci, *oval, *ostream = NULL, *odl = Py_None;
    double alpha, beta;
    long long rows, cols;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OdOOdOOOLL|OO:sddmm", kwlist, &octx, &alpha, &oX, &oY, &beta, &orp,
                                     &oci, &oval, &rows, &cols, &ostream, &odl))
        return NULL;
    bsk_context *ctx = context_of(octx);
    void *stream;
    if (!ctx || stream_arg(ostream, &stream)) return NULL;

    view X, Y, rp, ci, val;
    view *all[] = {&X, &Y, &val, &rp, &ci};
    for (int i = 0; i < 5; i++) memset(all[i], 0, sizeof(view));
    PyObject *ret = NULL;
    if (view_get(&X, oX, "X", odl) || view_get(&Y, oY, "Y", odl) || view_get(&val, oval, "out.values", odl) ||
        view_get(&rp, orp, "out.row_ptr", odl) || view_get(&ci, oci, "out.col_idx", odl))
        goto done;
    bsk_memory mem;
    int dev;
    bsk_bsr out;
    bsk_dense dX, dY;
    if (same_place(all, 5, &mem, &dev) || as_dense(&X, mem, &dX) || as_dense(&Y, mem, &dY) ||
        as_bsr(&rp, &ci, &val, rows, cols, mem, &out))
        goto done;
    {
        char b0[32], b1[32];
        if (dX.dtype != dY.dtype) {
            fail(BSK_ERR_UNSUPPORTED, "sddmm: X (%s) and Y (%s) must have the same dtype",
                 dtype_text(X.dtype, b0, sizeof b0), dtype_text(Y.dtype, b1, sizeof b1));
            goto done;
        }
        if (out.dtype != BSK_F32 && out.dtype != dX.dtype) {
            fail(BSK_ERR_UNSUPPORTED, "sddmm: out.values (%s) must be float32 or X's dtype (%s)",
                 dtype_text(val.dtype, b0, sizeof b0), dtype_text(X.dtype, b1, sizeof b1));
            goto done;
        }
        if (dX.rows != rows || dY.rows != cols || dX.cols != dY.cols) {
            fail(BSK_ERR_SHAPE_MISMATCH, "sddmm: X is %lldx%lld and Y is %lldx%lld; a %lldx%lld output needs X rows x D "
                 "and Y cols x D", (long long)dX.rows, (long long)dX.cols, (long long)dY.rows, (long long)dY.cols,
                 rows, cols);
            goto done;
        }
    }
    bsk_status s;
    Py_BEGIN_ALLOW_THREADS
    s = prepare_device(ctx, mem, dev, stream);
    if (!s) s = bsk_sddmm(ctx, (float)alpha, &dX, &dY, (float)beta, &out);
    Py_END_ALLOW_THREADS
    if (s) { status_error("sddmm", s); goto done; }
    ret = Py_NewRef(Py_None);
done:
    for (int i = 0; i < 5; i++) view_release(all[i]);
    return ret;
}

static const char validate_doc[] =
    "bsr_validate(row_ptr, col_idx, values, rows, cols, dlpack_stream=None)\n"
    "Full structural check of a BSR matrix (bsk_bsr_validate). Device metadata is copied to the host:\n"
    "this synchronizes. Raises BSKError(BSK_ERR_INVALID_BSR, ...) on a malformed pattern.";

static PyObject *py_bsr_validate(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"row_ptr", "col_idx", "values", "rows", "cols", "dlpack_stream", NULL};
    PyObject *orp, *oci, *oval, *odl = Py_None;
    long long rows, cols;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOLL|O:bsr_validate", kwlist, &orp, &oci, &oval, &rows, &cols, &odl))
        return NULL;
    view rp, ci, val;
    view *all[] = {&val, &rp, &ci};
    for (int i = 0; i < 3; i++) memset(all[i], 0, sizeof(view));
    PyObject *ret = NULL;
    bsk_memory mem;
    int dev;
    bsk_bsr A;
    if (view_get(&val, oval, "values", odl) || view_get(&rp, orp, "row_ptr", odl) ||
        view_get(&ci, oci, "col_idx", odl) || same_place(all, 3, &mem, &dev) ||
        as_bsr(&rp, &ci, &val, rows, cols, mem, &A))
        goto done;
    bsk_status s = BSK_SUCCESS;
    Py_BEGIN_ALLOW_THREADS
#ifdef BSK_WITH_CUDA
    if (mem == BSK_MEM_DEVICE && cudaSetDevice(dev) != cudaSuccess) {
        (void)cudaGetLastError();
        s = BSK_ERR_NO_DEVICE;
    }
#endif
    if (!s) s = bsk_bsr_validate(&A);
    Py_END_ALLOW_THREADS
    if (s) { status_error("bsr_validate", s); goto done; }
    ret = Py_NewRef(Py_None);
done:
    for (int i = 0; i < 3; i++) view_release(all[i]);
    return ret;
}

/* ---------------------------------------------------------------- attention: layouts */

/* The arrays of a library-allocated layout (a builder's, bsk_attn_layout_alloc's or a clone's) are shared
   by the AttnLayout object and every DLPack capsule exported from it (torch tensors viewing the arrays
   without a copy). The last of them to go frees the arrays. The count is atomic and the free needs no
   Python, because torch drops exported tensors from any thread without taking the GIL. */
typedef struct {
    atomic_long refs;
    bsk_attn_layout L;
} layout_store;

static void store_decref(layout_store *st)
{
    if (st && atomic_fetch_sub(&st->refs, 1) == 1) {
        bsk_attn_layout_free(&st->L);
        free(st);
    }
}

typedef struct {
    PyObject_HEAD
    layout_store *st;
    int dev_id; /* CUDA device of a device layout; -1 for host */
} AttnLayoutObject;

static PyTypeObject AttnLayoutType;

static void AttnLayout_dealloc(AttnLayoutObject *self)
{
    layout_store *st = self->st;
    self->st = NULL;
    if (st) {
        /* A device layout's last reference frees with cudaFree, which waits for the device. */
        Py_BEGIN_ALLOW_THREADS
        store_decref(st);
        Py_END_ALLOW_THREADS
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A new AttnLayout owning L (moved in: on failure L is freed). */
static PyObject *layout_wrap(bsk_attn_layout *L, int dev_id)
{
    layout_store *st = (layout_store *)malloc(sizeof *st);
    AttnLayoutObject *o = st ? PyObject_New(AttnLayoutObject, &AttnLayoutType) : NULL;
    if (!o) {
        free(st);
        bsk_attn_layout_free(L);
        return st ? NULL : PyErr_NoMemory();
    }
    atomic_init(&st->refs, 1);
    st->L = *L;
    memset(L, 0, sizeof *L);
    o->st = st;
    o->dev_id = dev_id;
    return (PyObject *)o;
}

static const bsk_attn_layout *layout_of(AttnLayoutObject *self) { return &self->st->L; }

/* Exported capsules: the DLPack tensor, its shape, and a reference to the store. */
typedef struct {
    bsk_DLManagedTensor mt;
    int64_t shape[4];
    layout_store *st;
} layout_export;

static void layout_export_deleter(bsk_DLManagedTensor *mt)
{
    layout_export *e = (layout_export *)mt->manager_ctx;
    store_decref(e->st);
    free(e);
}

static void layout_capsule_destructor(PyObject *cap)
{
    /* A consumer renames the capsule "used_dltensor" and calls the deleter itself; an unconsumed one is ours. */
    if (!PyCapsule_IsValid(cap, "dltensor")) return;
    bsk_DLManagedTensor *mt = (bsk_DLManagedTensor *)PyCapsule_GetPointer(cap, "dltensor");
    if (mt && mt->deleter) mt->deleter(mt);
}

static const char layout_export_doc[] =
    "export(which) -> DLPack capsule (int32) viewing one of the layout's arrays, for torch.from_dlpack:\n"
    "which 0 full_count [batch, heads, mq], 1 full_idx [batch, heads, mq, capacity], 2 part_count,\n"
    "3 part_idx. The arrays stay alive as long as the layout or any tensor viewing them.";

static PyObject *AttnLayout_export(AttnLayoutObject *self, PyObject *arg)
{
    long which = PyLong_AsLong(arg);
    if (which == -1 && PyErr_Occurred()) return NULL;
    if (which < 0 || which > 3) return fail(BSK_ERR_INVALID_ARGUMENT, "export: which must be 0..3, got %ld", which);
    const bsk_attn_layout *L = layout_of(self);
    layout_export *e = (layout_export *)calloc(1, sizeof *e);
    if (!e) return PyErr_NoMemory();
    int32_t *arrays[4] = {L->full_count, L->full_idx, L->part_count, L->part_idx};
    e->shape[0] = L->batch;
    e->shape[1] = L->heads;
    e->shape[2] = bsk_attn_layout_mq(L);
    e->shape[3] = L->capacity;
    e->mt.dl_tensor.data = arrays[which];
    e->mt.dl_tensor.device.device_type = L->mem == BSK_MEM_DEVICE ? BSK_DL_CUDA : BSK_DL_CPU;
    e->mt.dl_tensor.device.device_id = L->mem == BSK_MEM_DEVICE ? self->dev_id : 0;
    e->mt.dl_tensor.ndim = which & 1 ? 4 : 3;
    e->mt.dl_tensor.dtype.code = BSK_DL_INT;
    e->mt.dl_tensor.dtype.bits = 32;
    e->mt.dl_tensor.dtype.lanes = 1;
    e->mt.dl_tensor.shape = e->shape;
    e->mt.dl_tensor.strides = NULL; /* compact */
    e->mt.dl_tensor.byte_offset = 0;
    e->mt.manager_ctx = e;
    e->mt.deleter = layout_export_deleter;
    e->st = self->st;
    atomic_fetch_add(&self->st->refs, 1);
    PyObject *cap = PyCapsule_New(&e->mt, "dltensor", layout_capsule_destructor);
    if (!cap) layout_export_deleter(&e->mt);
    return cap;
}

/* CUDA device index argument: -1 (or None) is the host. */
static int device_arg(PyObject *o, int *dev)
{
    *dev = -1;
    if (!o || o == Py_None) return 0;
    long d = PyLong_AsLong(o);
    if (d == -1 && PyErr_Occurred()) return -1;
    if (d < -1 || d > 1 << 20) {
        fail(BSK_ERR_INVALID_ARGUMENT, "device index %ld is out of range (-1 for the host, or a CUDA device)", d);
        return -1;
    }
    *dev = (int)d;
    return 0;
}

static bsk_status set_device(int dev)
{
    if (dev < 0) return BSK_SUCCESS;
#ifdef BSK_WITH_CUDA
    if (cudaSetDevice(dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return BSK_ERR_NO_DEVICE;
    }
    return BSK_SUCCESS;
#else
    return BSK_ERR_NO_DEVICE;
#endif
}

static PyObject *AttnLayout_clone(AttnLayoutObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"device", NULL};
    PyObject *odev = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:clone", kwlist, &odev)) return NULL;
    int dev;
    if (device_arg(odev, &dev)) return NULL;
    bsk_attn_layout C;
    bsk_status s;
    const bsk_attn_layout *L = layout_of(self);
    Py_BEGIN_ALLOW_THREADS
    /* The copy runs on the device that holds the source, or else the destination. */
    s = set_device(L->mem == BSK_MEM_DEVICE ? self->dev_id : dev);
    if (!s && L->mem == BSK_MEM_DEVICE && dev >= 0 && dev != self->dev_id) s = BSK_ERR_UNSUPPORTED;
    if (!s) s = bsk_attn_layout_clone(L, dev >= 0 ? BSK_MEM_DEVICE : BSK_MEM_HOST, &C);
    Py_END_ALLOW_THREADS
    if (s == BSK_ERR_UNSUPPORTED)
        return fail(s, "AttnLayout.clone: copying a layout from cuda:%d to cuda:%d directly is not supported; "
                    "go through the host", self->dev_id, dev);
    if (s) return status_error("bsk_attn_layout_clone", s);
    return layout_wrap(&C, dev);
}

static PyObject *AttnLayout_validate(AttnLayoutObject *self, PyObject *Py_UNUSED(ignored))
{
    bsk_status s;
    const bsk_attn_layout *L = layout_of(self);
    Py_BEGIN_ALLOW_THREADS
    s = set_device(L->mem == BSK_MEM_DEVICE ? self->dev_id : -1);
    if (!s) s = bsk_attn_layout_validate(L);
    Py_END_ALLOW_THREADS
    if (s) return status_error("bsk_attn_layout_validate", s);
    Py_RETURN_NONE;
}

static PyObject *AttnLayout_tiles(AttnLayoutObject *self, PyObject *Py_UNUSED(ignored))
{
    bsk_status s;
    int64_t nf = 0, np = 0;
    const bsk_attn_layout *L = layout_of(self);
    Py_BEGIN_ALLOW_THREADS
    s = set_device(L->mem == BSK_MEM_DEVICE ? self->dev_id : -1);
    if (!s) s = bsk_attn_layout_tiles(L, &nf, &np);
    Py_END_ALLOW_THREADS
    if (s) return status_error("bsk_attn_layout_tiles", s);
    return Py_BuildValue("(LL)", (long long)nf, (long long)np);
}

static PyObject *AttnLayout_get(AttnLayoutObject *self, void *closure)
{
    const bsk_attn_layout *L = layout_of(self);
    switch ((int)(intptr_t)closure) {
    case 0: return PyLong_FromLongLong(L->seq_q);
    case 1: return PyLong_FromLongLong(L->seq_k);
    case 2: return PyLong_FromLong(L->block_q);
    case 3: return PyLong_FromLong(L->block_k);
    case 4: return PyLong_FromLong(L->batch);
    case 5: return PyLong_FromLong(L->heads);
    case 6: return PyLong_FromLong(L->capacity);
    case 7: return PyLong_FromLongLong(bsk_attn_layout_mq(L));
    case 8: return PyLong_FromLongLong(bsk_attn_layout_nb(L));
    default: return PyLong_FromLong(L->mem == BSK_MEM_DEVICE ? self->dev_id : -1);
    }
}

static PyObject *AttnLayout_repr(AttnLayoutObject *self)
{
    const bsk_attn_layout *L = layout_of(self);
    return PyUnicode_FromFormat("<_bsk.AttnLayout seq %lld x %lld, blocks %d x %d, batch %d, heads %d, capacity %d, %s>",
                                (long long)L->seq_q, (long long)L->seq_k, (int)L->block_q, (int)L->block_k,
                                (int)L->batch, (int)L->heads, (int)L->capacity,
                                L->mem == BSK_MEM_DEVICE ? "device" : "host");
}

static PyMethodDef AttnLayout_methods[] = {
    {"export", (PyCFunction)AttnLayout_export, METH_O, layout_export_doc},
    {"clone", (PyCFunction)(void (*)(void))AttnLayout_clone, METH_VARARGS | METH_KEYWORDS,
     "clone(device=-1) -> a deep copy on the host (-1) or CUDA device `device` (bsk_attn_layout_clone; synchronous)."},
    {"validate", (PyCFunction)AttnLayout_validate, METH_NOARGS,
     "Full structural check (bsk_attn_layout_validate); device arrays are copied to the host (synchronous)."},
    {"tiles", (PyCFunction)AttnLayout_tiles, METH_NOARGS, "(full, partial) tile counts (bsk_attn_layout_tiles)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef AttnLayout_getset[] = {
    {"seq_q", (getter)AttnLayout_get, NULL, "query length", (void *)0},
    {"seq_k", (getter)AttnLayout_get, NULL, "key length", (void *)1},
    {"block_q", (getter)AttnLayout_get, NULL, "query block size", (void *)2},
    {"block_k", (getter)AttnLayout_get, NULL, "key block size", (void *)3},
    {"batch", (getter)AttnLayout_get, NULL, "1 (shared) or the batch size", (void *)4},
    {"heads", (getter)AttnLayout_get, NULL, "1 (shared) or the number of query heads", (void *)5},
    {"capacity", (getter)AttnLayout_get, NULL, "slots per list and query block", (void *)6},
    {"mq", (getter)AttnLayout_get, NULL, "query blocks", (void *)7},
    {"nb", (getter)AttnLayout_get, NULL, "key blocks", (void *)8},
    {"device", (getter)AttnLayout_get, NULL, "CUDA device index, or -1 for host memory", (void *)9},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject AttnLayoutType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "blackwellsparsek._bsk.AttnLayout",
    .tp_basicsize = sizeof(AttnLayoutObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A bsk_attn_layout whose arrays libbsk allocated (a builder, attn_layout_alloc or clone); freed when "
              "this object and every tensor exported from it are gone. Made by the attn_layout_* functions.",
    .tp_dealloc = (destructor)AttnLayout_dealloc,
    .tp_repr = (reprfunc)AttnLayout_repr,
    .tp_methods = AttnLayout_methods,
    .tp_getset = AttnLayout_getset,
};

/* Builders: every one makes a host layout (bsk_attn_layout_*), wrapped. */
static PyObject *built(bsk_status s, bsk_attn_layout *L, const char *what)
{
    if (s) return status_error(what, s);
    return layout_wrap(L, -1);
}

static int block_args(long long bq, long long bk, int32_t *q, int32_t *k)
{
    if (bq < 1 || bk < 1 || bq > 1024 || bk > 1024) {
        fail(BSK_ERR_INVALID_ARGUMENT, "block size %lldx%lld is out of range (1..1024)", bq, bk);
        return -1;
    }
    *q = (int32_t)bq;
    *k = (int32_t)bk;
    return 0;
}

static int int32_arg(long long v, const char *name, int32_t *out)
{
    if (v < INT32_MIN || v > INT32_MAX) {
        fail(BSK_ERR_OVERFLOW, "%s = %lld does not fit int32", name, v);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

static PyObject *py_layout_dense(PyObject *Py_UNUSED(m), PyObject *args)
{
    long long sq, sk, bq, bk;
    int32_t q, k;
    if (!PyArg_ParseTuple(args, "LLLL:attn_layout_dense", &sq, &sk, &bq, &bk) || block_args(bq, bk, &q, &k)) return NULL;
    bsk_attn_layout L;
    bsk_status s;
    Py_BEGIN_ALLOW_THREADS
    s = bsk_attn_layout_dense(sq, sk, q, k, &L);
    Py_END_ALLOW_THREADS
    return built(s, &L, "bsk_attn_layout_dense");
}

static PyObject *py_layout_causal(PyObject *Py_UNUSED(m), PyObject *args)
{
    long long sq, sk, bq, bk, off;
    int32_t q, k;
    if (!PyArg_ParseTuple(args, "LLLLL:attn_layout_causal", &sq, &sk, &bq, &bk, &off) || block_args(bq, bk, &q, &k))
        return NULL;
    bsk_attn_layout L;
    bsk_status s;
    Py_BEGIN_ALLOW_THREADS
    s = bsk_attn_layout_causal(sq, sk, q, k, off, &L);
    Py_END_ALLOW_THREADS
    return built(s, &L, "bsk_attn_layout_causal");
}

static PyObject *py_layout_local(PyObject *Py_UNUSED(m), PyObject *args)
{
    long long sq, sk, bq, bk, wl, wr, gb, off;
    int causal;
    int32_t q, k, l32, r32, g32;
    if (!PyArg_ParseTuple(args, "LLLLLLLpL:attn_layout_local", &sq, &sk, &bq, &bk, &wl, &wr, &gb, &causal, &off) ||
        block_args(bq, bk, &q, &k) || int32_arg(wl, "window_left", &l32) || int32_arg(wr, "window_right", &r32) ||
        int32_arg(gb, "global_blocks", &g32))
        return NULL;
    bsk_attn_layout L;
    bsk_status s;
    Py_BEGIN_ALLOW_THREADS
    s = bsk_attn_layout_local(sq, sk, q, k, l32, r32, g32, causal, off, &L);
    Py_END_ALLOW_THREADS
    return built(s, &L, "bsk_attn_layout_local");
}

static const char layout_from_mask_doc[] =
    "attn_layout_from_mask(seq_q, seq_k, block_q, block_k, batch, heads, mask, causal, causal_offset)\n"
    "mask: host DLPack array of bool/uint8/int8, compact, batch*heads*mq*nb entries (any shape).";

static PyObject *py_layout_from_mask(PyObject *Py_UNUSED(m), PyObject *args)
{
    long long sq, sk, bq, bk, batch, heads, off;
    int causal;
    PyObject *omask;
    int32_t q, k, b32, h32;
    if (!PyArg_ParseTuple(args, "LLLLLLOpL:attn_layout_from_mask", &sq, &sk, &bq, &bk, &batch, &heads, &omask, &causal,
                          &off) ||
        block_args(bq, bk, &q, &k) || int32_arg(batch, "batch", &b32) || int32_arg(heads, "heads", &h32))
        return NULL;
    view mv;
    if (view_get(&mv, omask, "mask", Py_None)) return NULL;
    PyObject *ret = NULL;
    char b[64];
    if (mv.dev_type != BSK_DL_CPU && mv.dev_type != BSK_DL_CUDA_HOST) {
        fail(BSK_ERR_WRONG_LOCATION, "mask is on %s; the layout builders read a host mask",
             device_text(mv.dev_type, mv.dev_id, b, sizeof b));
        goto done;
    }
    if (mv.dtype.bits != 8 || mv.dtype.lanes != 1 ||
        (mv.dtype.code != BSK_DL_BOOL && mv.dtype.code != BSK_DL_UINT && mv.dtype.code != BSK_DL_INT)) {
        fail(BSK_ERR_UNSUPPORTED, "mask has dtype %s; pass bool, uint8 or int8", dtype_text(mv.dtype, b, sizeof b));
        goto done;
    }
    if (!is_compact(&mv)) {
        fail(BSK_ERR_BAD_LAYOUT, "mask must be contiguous");
        goto done;
    }
    if (sq < 0 || sk < 0 || batch < 1 || heads < 1) {
        fail(BSK_ERR_INVALID_ARGUMENT, "attn_layout_from_mask: seq lengths must be >= 0, batch and heads >= 1");
        goto done;
    }
    if (sq > SIZE_LIMIT || sk > SIZE_LIMIT) {
        fail(BSK_ERR_OVERFLOW, "attn_layout_from_mask: seq lengths %lld, %lld are past the limit of 2147483647", sq, sk);
        goto done;
    }
    {
        const int64_t mq = cdiv(sq, q), nb = cdiv(sk, k), want = mul_size(mul_size(batch * heads, mq), nb);
        if (want < 0) {
            fail(BSK_ERR_OVERFLOW, "attn_layout_from_mask: batch %lld x heads %lld x %lld query blocks x %lld key blocks "
                 "overflows", batch, heads, (long long)mq, (long long)nb);
            goto done;
        }
        int64_t n = 1;
        for (int i = 0; i < mv.ndim; i++) n *= mv.shape[i];
        if (n != want) {
            fail(BSK_ERR_SHAPE_MISMATCH, "mask has %lld entries; batch %lld x heads %lld x %lld query blocks x %lld key "
                 "blocks = %lld expected", (long long)n, batch, heads, (long long)mq, (long long)nb, (long long)want);
            goto done;
        }
    }
    {
        bsk_attn_layout L;
        bsk_status s;
        Py_BEGIN_ALLOW_THREADS
        s = bsk_attn_layout_from_mask(sq, sk, q, k, b32, h32, (const uint8_t *)mv.data, causal, off, &L);
        Py_END_ALLOW_THREADS
        ret = built(s, &L, "bsk_attn_layout_from_mask");
    }
done:
    view_release(&mv);
    return ret;
}

static PyObject *py_layout_alloc(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"seq_q", "seq_k", "block_q", "block_k", "batch", "heads", "capacity", "device", NULL};
    long long sq, sk, bq, bk, batch, heads, cap;
    PyObject *odev = Py_None;
    int32_t q, k, b32, h32, c32;
    int dev;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "LLLLLLL|O:attn_layout_alloc", kwlist, &sq, &sk, &bq, &bk, &batch, &heads,
                                     &cap, &odev) ||
        block_args(bq, bk, &q, &k) || int32_arg(batch, "batch", &b32) || int32_arg(heads, "heads", &h32) ||
        int32_arg(cap, "capacity", &c32) || device_arg(odev, &dev))
        return NULL;
    bsk_attn_layout L;
    bsk_status s;
    Py_BEGIN_ALLOW_THREADS
    s = set_device(dev);
    if (!s) s = bsk_attn_layout_alloc(sq, sk, q, k, b32, h32, c32, dev >= 0 ? BSK_MEM_DEVICE : BSK_MEM_HOST, &L);
    Py_END_ALLOW_THREADS
    if (s) return status_error("bsk_attn_layout_alloc", s);
    return layout_wrap(&L, dev);
}

/* ---------------------------------------------------------------- attention: arguments */

/* A layout argument: an AttnLayout object, or a tuple (seq_q, seq_k, block_q, block_k, batch, heads,
   capacity, full_count, full_idx, part_count, part_idx) whose four arrays are int32 DLPack arrays (e.g.
   torch tensors), contiguous, of batch*heads*mq and batch*heads*mq*capacity entries in any shape. */
typedef struct {
    bsk_attn_layout L;
    view v[4];      /* the arrays of a tuple layout */
    int tuple;
    int dev_type, dev_id; /* of an AttnLayout object */
} layout_arg;

static void layout_arg_release(layout_arg *a)
{
    for (int i = 0; i < 4; i++) view_release(&a->v[i]);
}

static int int32_array(const view *v, int64_t want, const char *why)
{
    char b[32];
    if (v->dtype.code != BSK_DL_INT || v->dtype.bits != 32 || v->dtype.lanes != 1) {
        fail(BSK_ERR_UNSUPPORTED, "%s has dtype %s; layout arrays are int32", v->name, dtype_text(v->dtype, b, sizeof b));
        return -1;
    }
    if (!is_compact(v)) {
        fail(BSK_ERR_BAD_LAYOUT, "%s must be contiguous", v->name);
        return -1;
    }
    int64_t n = 1;
    for (int i = 0; i < v->ndim; i++) n *= v->shape[i];
    if (n != want) {
        fail(BSK_ERR_SHAPE_MISMATCH, "%s has %lld entries, expected %lld (%s)", v->name, (long long)n, (long long)want, why);
        return -1;
    }
    return 0;
}

/* Parse `o` into a; the tuple's arrays are borrowed through DLPack (views released by layout_arg_release). */
static int layout_arg_get(layout_arg *a, PyObject *o, PyObject *dlpack_stream)
{
    memset(a, 0, sizeof *a);
    if (PyObject_TypeCheck(o, &AttnLayoutType)) {
        AttnLayoutObject *lo = (AttnLayoutObject *)o;
        a->L = *layout_of(lo);
        a->dev_type = a->L.mem == BSK_MEM_DEVICE ? BSK_DL_CUDA : BSK_DL_CPU;
        a->dev_id = lo->dev_id;
        return 0;
    }
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 11) {
        PyErr_Format(PyExc_TypeError, "layout must be a _bsk.AttnLayout or an 11-tuple (seq_q, seq_k, block_q, block_k, "
                     "batch, heads, capacity, full_count, full_idx, part_count, part_idx), got %.100s",
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    long long n[7];
    for (int i = 0; i < 7; i++) {
        n[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(o, i));
        if (n[i] == -1 && PyErr_Occurred()) return -1;
    }
    static const char *names[4] = {"layout.full_count", "layout.full_idx", "layout.part_count", "layout.part_idx"};
    a->tuple = 1;
    for (int i = 0; i < 4; i++)
        if (view_get(&a->v[i], PyTuple_GET_ITEM(o, 7 + i), names[i], dlpack_stream)) { layout_arg_release(a); return -1; }
    if (block_args(n[2], n[3], &a->L.block_q, &a->L.block_k) || int32_arg(n[4], "layout.batch", &a->L.batch) ||
        int32_arg(n[5], "layout.heads", &a->L.heads) || int32_arg(n[6], "layout.capacity", &a->L.capacity))
        goto bad;
    if (n[0] < 0 || n[1] < 0 || a->L.batch < 1 || a->L.heads < 1 || a->L.capacity < 0) {
        fail(BSK_ERR_INVALID_ARGUMENT, "layout: seq lengths %lld, %lld; batch %lld, heads %lld, capacity %lld out of range",
             n[0], n[1], n[4], n[5], n[6]);
        goto bad;
    }
    if (n[0] > SIZE_LIMIT || n[1] > SIZE_LIMIT) {
        fail(BSK_ERR_OVERFLOW, "layout: seq lengths %lld, %lld are past the limit of 2147483647", n[0], n[1]);
        goto bad;
    }
    a->L.seq_q = n[0];
    a->L.seq_k = n[1];
    {
        int64_t rows = mul_size((int64_t)a->L.batch * a->L.heads, cdiv(n[0], a->L.block_q)),
                idx = mul_size(rows, a->L.capacity);
        if (rows < 0 || idx < 0) {
            fail(BSK_ERR_OVERFLOW, "layout: batch %lld x heads %lld x %lld query blocks x capacity %lld overflows", n[4],
                 n[5], (long long)cdiv(n[0], a->L.block_q), n[6]);
            goto bad;
        }
        char why[96];
        snprintf(why, sizeof why, "batch*heads*mq = %lld", (long long)rows);
        if (int32_array(&a->v[0], rows, why) || int32_array(&a->v[2], rows, why)) goto bad;
        snprintf(why, sizeof why, "batch*heads*mq*capacity = %lld", (long long)idx);
        if (int32_array(&a->v[1], idx, why) || int32_array(&a->v[3], idx, why)) goto bad;
    }
    a->L.full_count = (int32_t *)a->v[0].data;
    a->L.full_idx = (int32_t *)a->v[1].data;
    a->L.part_count = (int32_t *)a->v[2].data;
    a->L.part_idx = (int32_t *)a->v[3].data;
    return 0;
bad:
    layout_arg_release(a);
    return -1;
}

/* The layout's place must be the operands': checked after same_place() of the tensors. */
static int layout_place(layout_arg *a, bsk_memory mem, int dev, const char *first)
{
    char b0[64], b1[64];
    if (a->tuple) {
        view *vs[4] = {&a->v[0], &a->v[1], &a->v[2], &a->v[3]};
        bsk_memory lm;
        int ld;
        if (same_place(vs, 4, &lm, &ld)) return -1;
        a->dev_type = vs[0]->dev_type;
        a->dev_id = ld;
        a->L.mem = lm;
    }
    int on_dev = a->L.mem == BSK_MEM_DEVICE;
    if (on_dev != (mem == BSK_MEM_DEVICE) || (on_dev && a->dev_id != dev)) {
        fail(BSK_ERR_WRONG_LOCATION, "operands are on different devices: %s is on %s, the layout on %s", first,
             mem == BSK_MEM_DEVICE ? device_text(BSK_DL_CUDA, dev, b0, sizeof b0) : "cpu",
             on_dev ? device_text(BSK_DL_CUDA, a->dev_id, b1, sizeof b1) : "cpu");
        return -1;
    }
    return 0;
}

/* A 4-D tensor as a bsk_attn_tensor: order 0 = [batch, seq, heads, dim], 1 = [batch, heads, seq, dim].
   Any non-negative strides; the head dimension must be contiguous (inner stride 1). */
static int as_attn_tensor(const view *v, int order, bsk_memory mem, bsk_attn_tensor *t)
{
    if (v->ndim != 4) {
        fail(BSK_ERR_SHAPE_MISMATCH, "%s must be 4-D [%s], got %d dimensions", v->name,
             order ? "batch, heads, seq, dim" : "batch, seq, heads, dim", v->ndim);
        return -1;
    }
    if (float_dtype(v, &t->dtype)) return -1;
    int64_t st[4];
    if (v->strides) {
        for (int i = 0; i < 4; i++) st[i] = v->strides[i];
    } else {
        st[3] = 1;
        for (int i = 2; i >= 0; i--) st[i] = st[i + 1] * v->shape[i + 1];
    }
    if (v->shape[3] > 1 && st[3] != 1) {
        fail(BSK_ERR_BAD_LAYOUT, "%s has inner (head dimension) stride %lld; BSK reads each head vector as contiguous "
             "memory: pass a tensor whose last dimension has stride 1", v->name, (long long)st[3]);
        return -1;
    }
    for (int i = 0; i < 3; i++)
        if (st[i] < 0) {
            fail(BSK_ERR_BAD_LAYOUT, "%s has a negative stride", v->name);
            return -1;
        }
    int s = order ? 2 : 1, h = order ? 1 : 2;
    t->batch = v->shape[0];
    t->seq = v->shape[s];
    t->heads = v->shape[h];
    t->dim = v->shape[3];
    t->stride_batch = st[0];
    t->stride_seq = st[s];
    t->stride_head = st[h];
    t->mem = mem;
    t->data = v->data;
    return 0;
}

static int kv_lens_arg(const view *v, int64_t batch)
{
    char why[64];
    snprintf(why, sizeof why, "one key length per batch entry, batch %lld", (long long)batch);
    if (v->dtype.code != BSK_DL_INT || v->dtype.bits != 32 || v->dtype.lanes != 1) {
        char b[32];
        fail(BSK_ERR_UNSUPPORTED, "kv_lens has dtype %s; it must be int32", dtype_text(v->dtype, b, sizeof b));
        return -1;
    }
    return index_vector(v, batch, why);
}

/* libbsk takes the scale as a float, 0 meaning 1/sqrt(dim): a double past float's range would convert to inf (undefined
   in C), and a non-zero one that rounds to 0 would silently become that default scale. */
static int scale_arg(double scale, const char *op, float *out)
{
    if (!isfinite(scale) || fabs(scale) > FLT_MAX || (scale != 0.0 && (float)scale == 0.0f)) {
        fail(BSK_ERR_INVALID_ARGUMENT, "%s: scale must be finite and, unless 0 (1/sqrt(dim)), a non-zero float32 "
             "(|scale| in [1.4e-45, 3.4e38]); got %g", op, scale);
        return -1;
    }
    *out = (float)scale;
    return 0;
}

static const char *order_text(int order) { return order ? "[batch, heads, seq, dim]" : "[batch, seq, heads, dim]"; }

/* Shapes of q and k agree (batch, dim, head grouping) — shared by attention and the gate. */
static int check_qk(const bsk_attn_tensor *q, const bsk_attn_tensor *k, const char *op)
{
    if (q->dtype != k->dtype) {
        fail(BSK_ERR_UNSUPPORTED, "%s: q and k must have the same dtype", op);
        return -1;
    }
    if (k->batch != q->batch || k->dim != q->dim) {
        fail(BSK_ERR_SHAPE_MISMATCH, "%s: q has batch %lld and head dim %lld, k has batch %lld and head dim %lld", op,
             (long long)q->batch, (long long)q->dim, (long long)k->batch, (long long)k->dim);
        return -1;
    }
    if (q->heads > 0 && (k->heads == 0 || q->heads % k->heads)) {
        fail(BSK_ERR_SHAPE_MISMATCH, "%s: %lld query heads are not a multiple of %lld key/value heads", op,
             (long long)q->heads, (long long)k->heads);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- attention: operations */

static const char attention_doc[] =
    "attention_forward(ctx, q, k, v, o, layout, lse=None, kv_lens=None, scale=0.0, causal=False,\n"
    "                  causal_offset=0, order=0, stream=0, dlpack_stream=None)\n"
    "Block-sparse attention forward (bsk_attention_forward) into o (and lse, float32 [batch, heads, seq_q]).\n"
    "q, o: 4-D, k, v: 4-D with kv_heads dividing heads; order 0: [batch, seq, heads, dim], 1: [batch, heads,\n"
    "seq, dim] (any strides, unit inner stride). layout: an AttnLayout or an 11-tuple (see layout_arg).\n"
    "kv_lens: int32 [batch] or None. scale 0: 1/sqrt(dim).";

static PyObject *py_attention(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"ctx", "q", "k", "v", "o", "layout", "lse", "kv_lens", "scale", "causal",
                             "causal_offset", "order", "stream", "dlpack_stream", NULL};
    PyObject *octx, *oq, *ok, *ov, *oo, *olay, *olse = Py_None, *okv = Py_None, *ostream = NULL, *odl = Py_None;
    double scale = 0.0;
    int causal = 0, order = 0;
    long long off = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOOO|OOdpLiOO:attention_forward", kwlist, &octx, &oq, &ok, &ov, &oo,
                                     &olay, &olse, &okv, &scale, &causal, &off, &order, &ostream, &odl))
        return NULL;
    bsk_context *ctx = context_of(octx);
    void *stream;
    if (!ctx || stream_arg(ostream, &stream)) return NULL;
    if (order != 0 && order != 1) return fail(BSK_ERR_INVALID_ARGUMENT, "attention: order must be 0 (bshd) or 1 (bhsd)");

    view q, k, v, o, lse, kvl;
    view *owned[6] = {&q, &k, &v, &o, &lse, &kvl}; /* released at the end */
    view *all[6] = {&q, &k, &v, &o, NULL, NULL};   /* the operands present, for same_place */
    for (int i = 0; i < 6; i++) memset(owned[i], 0, sizeof(view));
    layout_arg la;
    memset(&la, 0, sizeof la);
    int n = 4;
    PyObject *ret = NULL;
    if (view_get(&q, oq, "q", odl) || view_get(&k, ok, "k", odl) || view_get(&v, ov, "v", odl) ||
        view_get(&o, oo, "out", odl))
        goto done;
    if (olse != Py_None) {
        if (view_get(&lse, olse, "lse", odl)) goto done;
        all[n++] = &lse;
    }
    if (okv != Py_None) {
        if (view_get(&kvl, okv, "kv_lens", odl)) goto done;
        all[n++] = &kvl;
    }
    if (layout_arg_get(&la, olay, odl)) goto done;
    bsk_memory mem;
    int dev;
    bsk_attention_params p;
    memset(&p, 0, sizeof p);
    if (same_place(all, n, &mem, &dev) || layout_place(&la, mem, dev, "q") || as_attn_tensor(&q, order, mem, &p.q) ||
        as_attn_tensor(&k, order, mem, &p.k) || as_attn_tensor(&v, order, mem, &p.v) ||
        as_attn_tensor(&o, order, mem, &p.o) || check_qk(&p.q, &p.k, "attention"))
        goto done;
    if (p.v.dtype != p.q.dtype || p.o.dtype != p.q.dtype) {
        fail(BSK_ERR_UNSUPPORTED, "attention: q, k, v and out must have one dtype");
        goto done;
    }
    if (p.v.batch != p.k.batch || p.v.seq != p.k.seq || p.v.heads != p.k.heads || p.v.dim != p.k.dim) {
        fail(BSK_ERR_SHAPE_MISMATCH, "attention: k and v must have the same shape %s", order_text(order));
        goto done;
    }
    if (p.o.batch != p.q.batch || p.o.seq != p.q.seq || p.o.heads != p.q.heads || p.o.dim != p.q.dim) {
        fail(BSK_ERR_SHAPE_MISMATCH, "attention: out must have q's shape %s", order_text(order));
        goto done;
    }
    if (la.L.seq_q != p.q.seq || la.L.seq_k != p.k.seq || (la.L.batch != 1 && la.L.batch != p.q.batch) ||
        (la.L.heads != 1 && la.L.heads != p.q.heads)) {
        fail(BSK_ERR_SHAPE_MISMATCH, "attention: the layout is for seq_q %lld, seq_k %lld, batch %d, heads %d; q has seq "
             "%lld, batch %lld, heads %lld and k seq %lld (layout batch/heads must be 1 or equal)",
             (long long)la.L.seq_q, (long long)la.L.seq_k, (int)la.L.batch, (int)la.L.heads, (long long)p.q.seq,
             (long long)p.q.batch, (long long)p.q.heads, (long long)p.k.seq);
        goto done;
    }
    if (olse != Py_None) {
        char b[32];
        if (lse.dtype.code != BSK_DL_FLOAT || lse.dtype.bits != 32 || lse.dtype.lanes != 1) {
            fail(BSK_ERR_UNSUPPORTED, "lse has dtype %s; it must be float32", dtype_text(lse.dtype, b, sizeof b));
            goto done;
        }
        if (!is_compact(&lse)) {
            fail(BSK_ERR_BAD_LAYOUT, "lse must be contiguous [batch, heads, seq_q]");
            goto done;
        }
        int64_t cnt = 1;
        for (int i = 0; i < lse.ndim; i++) cnt *= lse.shape[i];
        if (cnt != p.q.batch * p.q.heads * p.q.seq) {
            fail(BSK_ERR_SHAPE_MISMATCH, "lse has %lld entries; [batch, heads, seq_q] = %lld expected", (long long)cnt,
                 (long long)(p.q.batch * p.q.heads * p.q.seq));
            goto done;
        }
        p.lse = (float *)lse.data;
    }
    if (okv != Py_None) {
        if (kv_lens_arg(&kvl, p.q.batch)) goto done;
        p.kv_lens = (const int32_t *)kvl.data;
    }
    if (scale_arg(scale, "attention", &p.scale)) goto done;
    p.layout = &la.L;
    p.causal = causal;
    p.causal_offset = off;
    bsk_status s;
    Py_BEGIN_ALLOW_THREADS
    s = prepare_device(ctx, mem, dev, stream);
    if (!s) s = bsk_attention_forward(ctx, &p);
    Py_END_ALLOW_THREADS
    if (s) { status_error("bsk_attention_forward", s); goto done; }
    ret = Py_NewRef(Py_None);
done:
    layout_arg_release(&la);
    for (int i = 0; i < 6; i++) view_release(owned[i]);
    return ret;
}

/* A float32 [batch, heads, seq_q] operand (lse, d_lse): contiguous, `want` entries. */
static int lse_arg(const view *v, int64_t want)
{
    char b[32];
    if (v->dtype.code != BSK_DL_FLOAT || v->dtype.bits != 32 || v->dtype.lanes != 1) {
        fail(BSK_ERR_UNSUPPORTED, "%s has dtype %s; it must be float32", v->name, dtype_text(v->dtype, b, sizeof b));
        return -1;
    }
    if (!is_compact(v)) {
        fail(BSK_ERR_BAD_LAYOUT, "%s must be contiguous [batch, heads, seq_q]", v->name);
        return -1;
    }
    int64_t cnt = 1;
    for (int i = 0; i < v->ndim; i++) cnt *= v->shape[i];
    if (cnt != want) {
        fail(BSK_ERR_SHAPE_MISMATCH, "%s has %lld entries; [batch, heads, seq_q] = %lld expected", v->name,
             (long long)cnt, (long long)want);
        return -1;
    }
    return 0;
}

static const char attention_bwd_doc[] =
    "attention_backward(ctx, q, k, v, o, d_o, lse, dq, dk, dv, layout, d_lse=None, kv_lens=None, scale=0.0,\n"
    "                   causal=False, causal_offset=0, order=0, stream=0, dlpack_stream=None)\n"
    "Block-sparse attention backward (bsk_attention_backward) into dq, dk, dv. q, o, d_o, dq: q's shape; k, v,\n"
    "dk, dv: k's shape (order as for attention_forward); lse (and d_lse, optional): float32 [batch, heads, seq_q].\n"
    "The same layout, kv_lens, scale and causal rule as the forward.";

static PyObject *py_attention_backward(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"ctx", "q", "k", "v", "o", "d_o", "lse", "dq", "dk", "dv", "layout", "d_lse", "kv_lens",
                             "scale", "causal", "causal_offset", "order", "stream", "dlpack_stream", NULL};
    PyObject *octx, *ot[9], *olay, *odl_lse = Py_None, *okv = Py_None, *ostream = NULL, *odl = Py_None;
    double scale = 0.0;
    int causal = 0, order = 0;
    long long off = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOOOOOOOO|OOdpLiOO:attention_backward", kwlist, &octx, &ot[0],
                                     &ot[1], &ot[2], &ot[3], &ot[4], &ot[5], &ot[6], &ot[7], &ot[8], &olay, &odl_lse,
                                     &okv, &scale, &causal, &off, &order, &ostream, &odl))
        return NULL;
    bsk_context *ctx = context_of(octx);
    void *stream;
    if (!ctx || stream_arg(ostream, &stream)) return NULL;
    if (order != 0 && order != 1) return fail(BSK_ERR_INVALID_ARGUMENT, "attention: order must be 0 (bshd) or 1 (bhsd)");
    static const char *names[9] = {"q", "k", "v", "out", "grad_out", "lse", "grad_q", "grad_k", "grad_v"};
    view vw[11]; /* the nine above, d_lse, kv_lens */
    view *all[11];
    for (int i = 0; i < 11; i++) memset(&vw[i], 0, sizeof(view));
    layout_arg la;
    memset(&la, 0, sizeof la);
    int n = 9;
    PyObject *ret = NULL;
    for (int i = 0; i < 9; i++) {
        if (view_get(&vw[i], ot[i], names[i], odl)) goto done;
        all[i] = &vw[i];
    }
    if (odl_lse != Py_None) {
        if (view_get(&vw[9], odl_lse, "grad_lse", odl)) goto done;
        all[n++] = &vw[9];
    }
    if (okv != Py_None) {
        if (view_get(&vw[10], okv, "kv_lens", odl)) goto done;
        all[n++] = &vw[10];
    }
    if (layout_arg_get(&la, olay, odl)) goto done;
    bsk_memory mem;
    int dev;
    bsk_attention_bwd_params p;
    memset(&p, 0, sizeof p);
    bsk_attn_tensor *ts[8] = {&p.q, &p.k, &p.v, &p.o, &p.d_o, &p.dq, &p.dk, &p.dv};
    const int vi[8] = {0, 1, 2, 3, 4, 6, 7, 8};
    if (same_place(all, n, &mem, &dev) || layout_place(&la, mem, dev, "q")) goto done;
    for (int i = 0; i < 8; i++)
        if (as_attn_tensor(&vw[vi[i]], order, mem, ts[i])) goto done;
    if (check_qk(&p.q, &p.k, "attention backward")) goto done;
    for (int i = 2; i < 8; i++)
        if (ts[i]->dtype != p.q.dtype) {
            fail(BSK_ERR_UNSUPPORTED, "attention backward: q, k, v, out, grad_out and the gradients must have one dtype");
            goto done;
        }
    if (lse_arg(&vw[5], p.q.batch * p.q.heads * p.q.seq)) goto done;
    p.lse = (const float *)vw[5].data;
    if (odl_lse != Py_None) {
        if (lse_arg(&vw[9], p.q.batch * p.q.heads * p.q.seq)) goto done;
        p.d_lse = (const float *)vw[9].data;
    }
    if (okv != Py_None) {
        if (kv_lens_arg(&vw[10], p.q.batch)) goto done;
        p.kv_lens = (const int32_t *)vw[10].data;
    }
    if (scale_arg(scale, "attention backward", &p.scale)) goto done;
    p.layout = &la.L;
    p.causal = causal;
    p.causal_offset = off;
    bsk_status s;
    Py_BEGIN_ALLOW_THREADS
    s = prepare_device(ctx, mem, dev, stream);
    if (!s) s = bsk_attention_backward(ctx, &p);
    Py_END_ALLOW_THREADS
    if (s) { status_error("bsk_attention_backward", s); goto done; }
    ret = Py_NewRef(Py_None);
done:
    layout_arg_release(&la);
    for (int i = 0; i < 11; i++) view_release(&vw[i]);
    return ret;
}

static const char topk_doc[] =
    "topk_block_layout(ctx, q, k, out, top_k, kv_lens=None, causal=False, causal_offset=0, keep_first=True,\n"
    "                  keep_diagonal=True, w_q=None, w_k=None, order=0, stream=0, dlpack_stream=None, pooled=False)\n"
    "Top-k block gate (bsk_topk_block_layout) writing into the layout `out` (an AttnLayout or an 11-tuple\n"
    "of int32 arrays) with out's batch = q's batch, heads = q's heads. w_q, w_k: dim x proj_dim or None.\n"
    "pooled: q and k hold one row per query / key block of out (the block means), out's seq_q / seq_k the\n"
    "real lengths.";

static PyObject *py_topk(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"ctx", "q", "k", "out", "top_k", "kv_lens", "causal", "causal_offset", "keep_first",
                             "keep_diagonal", "w_q", "w_k", "order", "stream", "dlpack_stream", "pooled", NULL};
    PyObject *octx, *oq, *ok, *oout, *okv = Py_None, *owq = Py_None, *owk = Py_None, *ostream = NULL, *odl = Py_None;
    long long top_k, off = 0;
    int causal = 0, keep_first = 1, keep_diag = 1, order = 0, pooled = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOL|OpLppOOiOOp:topk_block_layout", kwlist, &octx, &oq, &ok, &oout,
                                     &top_k, &okv, &causal, &off, &keep_first, &keep_diag, &owq, &owk, &order, &ostream,
                                     &odl, &pooled))
        return NULL;
    bsk_context *ctx = context_of(octx);
    void *stream;
    if (!ctx || stream_arg(ostream, &stream)) return NULL;
    if (order != 0 && order != 1) return fail(BSK_ERR_INVALID_ARGUMENT, "topk: order must be 0 (bshd) or 1 (bhsd)");
    if ((owq == Py_None) != (owk == Py_None))
        return fail(BSK_ERR_NULL_POINTER, "topk_block_layout: give both projections w_q and w_k, or neither");
    if (top_k < 1 || top_k > INT32_MAX)
        return fail(BSK_ERR_INVALID_ARGUMENT, "topk_block_layout: top_k = %lld must be in 1..2^31-1", top_k);

    view q, k, kvl, wq, wk;
    view *owned[5] = {&q, &k, &kvl, &wq, &wk};  /* released at the end */
    view *all[5] = {&q, &k, NULL, NULL, NULL}; /* the operands present, for same_place */
    for (int i = 0; i < 5; i++) memset(owned[i], 0, sizeof(view));
    layout_arg la;
    memset(&la, 0, sizeof la);
    int n = 2;
    PyObject *ret = NULL;
    if (view_get(&q, oq, "q", odl) || view_get(&k, ok, "k", odl)) goto done;
    if (okv != Py_None) {
        if (view_get(&kvl, okv, "kv_lens", odl)) goto done;
        all[n++] = &kvl;
    }
    if (owq != Py_None) {
        if (view_get(&wq, owq, "w_q", odl) || view_get(&wk, owk, "w_k", odl)) goto done;
        all[n++] = &wq;
        all[n++] = &wk;
    }
    if (layout_arg_get(&la, oout, odl)) goto done;
    bsk_memory mem;
    int dev;
    bsk_topk_params p;
    memset(&p, 0, sizeof p);
    bsk_dense dq, dk;
    if (same_place(all, n, &mem, &dev) || layout_place(&la, mem, dev, "q") || as_attn_tensor(&q, order, mem, &p.q) ||
        as_attn_tensor(&k, order, mem, &p.k) || check_qk(&p.q, &p.k, "topk_block_layout"))
        goto done;
    /* pooled: q and k hold one row per query / key block of out */
    const int64_t want_q = pooled ? bsk_attn_layout_mq(&la.L) : la.L.seq_q, want_k = pooled ? bsk_attn_layout_nb(&la.L) : la.L.seq_k;
    if (want_q != p.q.seq || want_k != p.k.seq || la.L.batch != p.q.batch || la.L.heads != p.q.heads) {
        fail(BSK_ERR_SHAPE_MISMATCH, "topk_block_layout: out is for seq_q %lld, seq_k %lld, batch %d, heads %d%s; q has seq "
             "%lld, batch %lld, heads %lld and k seq %lld", (long long)la.L.seq_q, (long long)la.L.seq_k,
             (int)la.L.batch, (int)la.L.heads, pooled ? " (pooled: q needs one row per query block, k one per key block)" : "",
             (long long)p.q.seq, (long long)p.q.batch, (long long)p.q.heads, (long long)p.k.seq);
        goto done;
    }
    if (owq != Py_None) {
        if (as_dense(&wq, mem, &dq) || as_dense(&wk, mem, &dk)) goto done;
        if (dq.rows != p.q.dim || dk.rows != p.q.dim || dq.cols != dk.cols) {
            fail(BSK_ERR_SHAPE_MISMATCH, "topk_block_layout: w_q is %lldx%lld and w_k %lldx%lld; both must be dim (%lld) "
                 "x proj_dim", (long long)dq.rows, (long long)dq.cols, (long long)dk.rows, (long long)dk.cols,
                 (long long)p.q.dim);
            goto done;
        }
        p.w_q = &dq;
        p.w_k = &dk;
    }
    if (okv != Py_None) {
        if (kv_lens_arg(&kvl, p.q.batch)) goto done;
        p.kv_lens = (const int32_t *)kvl.data;
    }
    p.top_k = (int32_t)top_k;
    p.causal = causal;
    p.causal_offset = off;
    p.keep_first = keep_first;
    p.keep_diagonal = keep_diag;
    p.pooled = pooled;
    bsk_status s;
    Py_BEGIN_ALLOW_THREADS
    s = prepare_device(ctx, mem, dev, stream);
    if (!s) s = bsk_topk_block_layout(ctx, &p, &la.L);
    Py_END_ALLOW_THREADS
    if (s) { status_error("bsk_topk_block_layout", s); goto done; }
    ret = Py_NewRef(Py_None);
done:
    layout_arg_release(&la);
    for (int i = 0; i < 5; i++) view_release(owned[i]);
    return ret;
}

static const char layout_check_doc[] =
    "attn_layout_validate(layout, dlpack_stream=None) / attn_layout_tiles(layout, dlpack_stream=None)\n"
    "Full check (bsk_attn_layout_validate) / (full, partial) tile counts of an AttnLayout or 11-tuple layout.\n"
    "Device arrays are copied to the host: this synchronizes.";

static PyObject *layout_check(PyObject *args, PyObject *kw, int tiles)
{
    static char *kwlist[] = {"layout", "dlpack_stream", NULL};
    PyObject *olay, *odl = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O", kwlist, &olay, &odl)) return NULL;
    layout_arg la;
    if (layout_arg_get(&la, olay, odl)) return NULL;
    PyObject *ret = NULL;
    if (la.tuple) {
        view *vs[4] = {&la.v[0], &la.v[1], &la.v[2], &la.v[3]};
        bsk_memory lm;
        if (same_place(vs, 4, &lm, &la.dev_id)) goto done;
        la.L.mem = lm;
    }
    bsk_status s;
    int64_t nf = 0, np = 0;
    Py_BEGIN_ALLOW_THREADS
    s = set_device(la.L.mem == BSK_MEM_DEVICE ? la.dev_id : -1);
    if (!s) s = tiles ? bsk_attn_layout_tiles(&la.L, &nf, &np) : bsk_attn_layout_validate(&la.L);
    Py_END_ALLOW_THREADS
    if (s) { status_error(tiles ? "bsk_attn_layout_tiles" : "bsk_attn_layout_validate", s); goto done; }
    ret = tiles ? Py_BuildValue("(LL)", (long long)nf, (long long)np) : Py_NewRef(Py_None);
done:
    layout_arg_release(&la);
    return ret;
}

static PyObject *py_layout_validate(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw) { return layout_check(args, kw, 0); }
static PyObject *py_layout_tiles(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw) { return layout_check(args, kw, 1); }

/* ---------------------------------------------------------------- module-level facts */

static PyObject *py_version(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyUnicode_FromString(bsk_version_string());
}

static PyObject *py_status_string(PyObject *Py_UNUSED(m), PyObject *arg)
{
    long s = PyLong_AsLong(arg);
    if (s == -1 && PyErr_Occurred()) return NULL;
    /* a code past int is no status: (int) would truncate it to one (2^32 to BSK_SUCCESS) */
    return PyUnicode_FromString(bsk_status_string(s < INT_MIN || s > INT_MAX ? -1 : (int)s));
}

static PyObject *py_make_error(PyObject *Py_UNUSED(m), PyObject *args)
{
    int code;
    const char *msg;
    if (!PyArg_ParseTuple(args, "is:make_error", &code, &msg)) return NULL;
    return make_error_obj(code, msg);
}

static PyObject *py_device_query(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    bsk_device_info info;
    memset(&info, 0, sizeof info);
    bsk_status s;
    Py_BEGIN_ALLOW_THREADS
    s = bsk_device_query(&info);
    Py_END_ALLOW_THREADS
    if (s && s != BSK_ERR_NO_DEVICE) return status_error("device_query", s);
    if (s == BSK_ERR_NO_DEVICE)
        return Py_BuildValue("{sOss}", "available", Py_False, "arch_list", info.arch_list);
    return Py_BuildValue("{sOsss(ii)sisisisLsLss}", "available", Py_True, "name", info.name, "capability",
                         info.cc_major, info.cc_minor, "multiprocessors", info.multiprocessors, "driver_version",
                         info.driver_version, "runtime_version", info.runtime_version, "global_mem_bytes",
                         (long long)info.global_mem_bytes, "l2_bytes", (long long)info.l2_bytes, "arch_list",
                         info.arch_list);
}

/* Benchmark hook (not API): libbsk's attention kernel choice, bsk__attn_variant (src/attention/attention_internal.h:
   0 default, 3 the mma.sync kernel, 4..8 builds of the Hopper kernel, src/cuda/hopper/attention_hopper.cu), so that a
   Python benchmark can time builds against each other in one process. Returns the previous value. */
extern int bsk__attn_variant;
static PyObject *py_attn_variant(PyObject *Py_UNUSED(m), PyObject *arg)
{
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (v < 0 || v > 8) return fail(BSK_ERR_INVALID_ARGUMENT, "_attn_variant: %ld is outside 0..8", v);
    int old = bsk__attn_variant;
    bsk__attn_variant = (int)v;
    return PyLong_FromLong(old);
}

static PyMethodDef module_methods[] = {
    {"_attn_variant", py_attn_variant, METH_O, "benchmark hook: set libbsk's attention kernel variant, return the old."},
    {"spmm", (PyCFunction)(void (*)(void))py_spmm, METH_VARARGS | METH_KEYWORDS, spmm_doc},
    {"spmm_tune", (PyCFunction)(void (*)(void))py_spmm_tune, METH_VARARGS | METH_KEYWORDS, spmm_tune_doc},
    {"sddmm", (PyCFunction)(void (*)(void))py_sddmm, METH_VARARGS | METH_KEYWORDS, sddmm_doc},
    {"bsr_validate", (PyCFunction)(void (*)(void))py_bsr_validate, METH_VARARGS | METH_KEYWORDS, validate_doc},
    {"version", py_version, METH_NOARGS, "libbsk's version string."},
    {"status_string", py_status_string, METH_O, "bsk_status_string(code)."},
    {"make_error", py_make_error, METH_VARARGS, "make_error(code, message) -> BSKError instance."},
    {"device_query", py_device_query, METH_NOARGS, "bsk_device_query() as a dict ('available': False without GPU)."},
    {"attention_forward", (PyCFunction)(void (*)(void))py_attention, METH_VARARGS | METH_KEYWORDS, attention_doc},
    {"attention_backward", (PyCFunction)(void (*)(void))py_attention_backward, METH_VARARGS | METH_KEYWORDS,
     attention_bwd_doc},
    {"topk_block_layout", (PyCFunction)(void (*)(void))py_topk, METH_VARARGS | METH_KEYWORDS, topk_doc},
    {"attn_layout_dense", py_layout_dense, METH_VARARGS,
     "attn_layout_dense(seq_q, seq_k, block_q, block_k) -> AttnLayout (host): every tile."},
    {"attn_layout_causal", py_layout_causal, METH_VARARGS,
     "attn_layout_causal(seq_q, seq_k, block_q, block_k, causal_offset) -> AttnLayout (host)."},
    {"attn_layout_local", py_layout_local, METH_VARARGS,
     "attn_layout_local(seq_q, seq_k, block_q, block_k, window_left, window_right, global_blocks, causal,\n"
     "causal_offset) -> AttnLayout (host): sliding window of key blocks plus global blocks."},
    {"attn_layout_from_mask", py_layout_from_mask, METH_VARARGS, layout_from_mask_doc},
    {"attn_layout_alloc", (PyCFunction)(void (*)(void))py_layout_alloc, METH_VARARGS | METH_KEYWORDS,
     "attn_layout_alloc(seq_q, seq_k, block_q, block_k, batch, heads, capacity, device=-1) -> an empty AttnLayout."},
    {"attn_layout_validate", (PyCFunction)(void (*)(void))py_layout_validate, METH_VARARGS | METH_KEYWORDS,
     layout_check_doc},
    {"attn_layout_tiles", (PyCFunction)(void (*)(void))py_layout_tiles, METH_VARARGS | METH_KEYWORDS, layout_check_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "blackwellsparsek._bsk",
    "Low-level binding of libbsk over DLPack tensors; use the blackwellsparsek package instead.", -1,
    module_methods,        NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__bsk(void)
{
    if (PyType_Ready(&ContextType) < 0 || PyType_Ready(&AttnLayoutType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    PyObject *dict = Py_BuildValue("{sssssOsOsO}", "__doc__",
                                   "A libbsk call failed. .status: the bsk_status name (e.g. 'BSK_ERR_SHAPE_MISMATCH'), "
                                   ".code: its number, .reason: the library's description.",
                                   "__module__", "blackwellsparsek", "status", Py_None, "code", Py_None, "reason", Py_None);
    if (!dict) goto fail;
    BSKError = PyErr_NewException("blackwellsparsek.BSKError", PyExc_RuntimeError, dict);
    Py_DECREF(dict);
    if (!BSKError || PyModule_AddObjectRef(m, "BSKError", BSKError) < 0) goto fail;
    if (PyModule_AddObjectRef(m, "Context", (PyObject *)&ContextType) < 0 ||
        PyModule_AddObjectRef(m, "AttnLayout", (PyObject *)&AttnLayoutType) < 0)
        goto fail;
    PyObject *names = PyDict_New();
    if (!names) goto fail;
    for (int i = 0; i < N_STATUS; i++) {
        PyObject *k = PyLong_FromLong(i), *v = PyUnicode_FromString(status_names[i]);
        int bad = !k || !v || PyDict_SetItem(names, k, v);
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (bad) { Py_DECREF(names); goto fail; }
    }
    if (PyModule_AddObject(m, "STATUS_NAMES", names) < 0) { Py_DECREF(names); goto fail; }
#ifdef BSK_WITH_CUDA
    const int with_cuda = 1;
#else
    const int with_cuda = 0;
#endif
    if (PyModule_AddIntConstant(m, "WITH_CUDA", with_cuda) || PyModule_AddIntConstant(m, "OP_N", BSK_OP_N) ||
        PyModule_AddIntConstant(m, "OP_T", BSK_OP_T) || PyModule_AddIntConstant(m, "BACKEND_AUTO", BSK_BACKEND_AUTO) ||
        PyModule_AddIntConstant(m, "BACKEND_CPU", BSK_BACKEND_CPU) ||
        PyModule_AddIntConstant(m, "BACKEND_CUDA", BSK_BACKEND_CUDA))
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
