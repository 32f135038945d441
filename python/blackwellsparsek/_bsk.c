/* _bsk.c — the CPython extension over libbsk (linked statically). It takes any object that speaks
   DLPack (__dlpack__ / __dlpack_device__: torch tensors on CPU or CUDA, NumPy arrays, CuPy, ...) and
   hands its data pointer, shape and row stride straight to bsk_dense / bsk_bsr: no copies.
   Every argument is checked here first, with a message that names it, so that a bad call raises
   BSKError (carrying the bsk_status name and code) before anything is written; the library then checks
   again and its own status becomes the same exception. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stdio.h>
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
    if (v->mt && v->mt->deleter) v->mt->deleter(v->mt);
    v->mt = NULL;
    Py_CLEAR(v->capsule);
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
    int ok = PyArg_ParseTuple(dev, "ii", &dt, &di);
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

static int is_compact(const view *v)
{
    if (!v->strides) return 1;
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
    int64_t mb = (rows + br - 1) / br;
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

static PyObject *Context_synchronize(ContextObject *self, PyObject *Py_UNUSED(ignored))
{
    bsk_status s;
    Py_BEGIN_ALLOW_THREADS
    s = bsk_synchronize(self->ctx);
    Py_END_ALLOW_THREADS
    if (s) return fail(s, "synchronize failed");
    Py_RETURN_NONE;
}

static PyObject *Context_last_kernel(ContextObject *self, void *Py_UNUSED(closure))
{
    return PyUnicode_FromString(bsk_last_kernel(self->ctx));
}

static PyObject *Context_has_device(ContextObject *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(bsk_has_device(self->ctx));
}

static PyMethodDef Context_methods[] = {
    {"synchronize", (PyCFunction)Context_synchronize, METH_NOARGS,
     "Wait for the work this context queued (reports asynchronous CUDA errors)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Context_getset[] = {
    {"last_kernel", (getter)Context_last_kernel, NULL, "Kernel the last spmm/sddmm on this context ran.", NULL},
    {"has_device", (getter)Context_has_device, NULL, "Whether this context can run on a CUDA device.", NULL},
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

static PyObject *py_spmm(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"ctx", "op", "alpha", "row_ptr", "col_idx", "values", "rows", "cols",
                             "B", "beta", "C", "stream", "dlpack_stream", NULL};
    PyObject *octx, *orp, *oci, *oval, *oB, *oC, *ostream = NULL, *odl = Py_None;
    int op;
    double alpha, beta;
    long long rows, cols;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OidOOOLLOdO|OO:spmm", kwlist, &octx, &op, &alpha, &orp, &oci, &oval,
                                     &rows, &cols, &oB, &beta, &oC, &ostream, &odl))
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
    Py_BEGIN_ALLOW_THREADS
    s = prepare_device(ctx, mem, dev, stream);
    if (!s) s = bsk_spmm(ctx, (bsk_op)op, (float)alpha, &A, &dB, (float)beta, &dC);
    Py_END_ALLOW_THREADS
    if (s) { status_error("spmm", s); goto done; }
    ret = Py_NewRef(Py_None);
done:
    for (int i = 0; i < 5; i++) view_release(all[i]);
    return ret;
}

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

/* ---------------------------------------------------------------- module-level facts */

static PyObject *py_version(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a))
{
    return PyUnicode_FromString(bsk_version_string());
}

static PyObject *py_status_string(PyObject *Py_UNUSED(m), PyObject *arg)
{
    long s = PyLong_AsLong(arg);
    if (s == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(bsk_status_string((int)s));
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

static PyMethodDef module_methods[] = {
    {"spmm", (PyCFunction)(void (*)(void))py_spmm, METH_VARARGS | METH_KEYWORDS, spmm_doc},
    {"sddmm", (PyCFunction)(void (*)(void))py_sddmm, METH_VARARGS | METH_KEYWORDS, sddmm_doc},
    {"bsr_validate", (PyCFunction)(void (*)(void))py_bsr_validate, METH_VARARGS | METH_KEYWORDS, validate_doc},
    {"version", py_version, METH_NOARGS, "libbsk's version string."},
    {"status_string", py_status_string, METH_O, "bsk_status_string(code)."},
    {"make_error", py_make_error, METH_VARARGS, "make_error(code, message) -> BSKError instance."},
    {"device_query", py_device_query, METH_NOARGS, "bsk_device_query() as a dict ('available': False without GPU)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "blackwellsparsek._bsk",
    "Low-level binding of libbsk over DLPack tensors; use the blackwellsparsek package instead.", -1,
    module_methods,        NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__bsk(void)
{
    if (PyType_Ready(&ContextType) < 0) return NULL;
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
    if (PyModule_AddObjectRef(m, "Context", (PyObject *)&ContextType) < 0) goto fail;
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
