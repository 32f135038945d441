"""The DLPack layer on NumPy arrays (and torch tensors mixed in): no copies, results written in place."""
import ctypes

import numpy as np
import pytest
import torch

import blackwellsparsek as bsk
from conftest import check_close, random_bsr


def _np_bsr(dtype=np.float32, seed=0):
    A = random_bsr(50, 40, (16, 8), 0.5, torch.float32, "cpu", seed=seed)
    return A.row_ptr.numpy(), A.col_idx.numpy(), A.values.numpy().astype(dtype), A.shape, A.to_dense().double()


def _rand(shape, dtype, seed):
    r = np.random.default_rng(seed).uniform(-1, 1, shape)
    r[np.abs(r) < 1 / 16] = 0.5
    return r.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_numpy_spmm_writes_out_in_place(dtype):
    row_ptr, col_idx, values, shape, Ad = _np_bsr(dtype)
    # values rounded to dtype: rebuild the dense reference from them (fp16 -> fp32 is exact)
    Ad = bsk.BSRMatrix(torch.from_numpy(row_ptr), torch.from_numpy(col_idx), torch.from_numpy(values).float(),
                       shape).to_dense().double()
    B = _rand((40, 12), dtype, 1)
    buf = np.full((50, 20), np.nan, dtype=dtype)
    out = buf[:, 3:15]  # a view with ld 20 into a larger buffer
    r = bsk.dlpack_spmm(row_ptr, col_idx, values, shape, B, out)
    assert r is out and np.shares_memory(out, buf)
    B64 = torch.from_numpy(B).double()
    tdt = torch.float32 if dtype == np.float32 else torch.float16
    check_close(torch.from_numpy(out.copy()), Ad @ B64, Ad.abs() @ B64.abs(), 40, tdt)
    assert np.isnan(buf[:, :3]).all() and np.isnan(buf[:, 15:]).all()


def test_numpy_alpha_beta_transpose():
    row_ptr, col_idx, values, shape, Ad = _np_bsr()
    B = _rand((50, 7), np.float32, 2)
    C0 = _rand((40, 7), np.float32, 3)
    C = C0.copy()
    bsk.dlpack_spmm(row_ptr, col_idx, values, shape, B, C, transpose_a=True, alpha=-2.0, beta=0.5)
    B64, C064 = torch.from_numpy(B).double(), torch.from_numpy(C0).double()
    want = -2.0 * Ad.t() @ B64 + 0.5 * C064
    check_close(torch.from_numpy(C), want, 2.0 * Ad.t().abs() @ B64.abs() + 0.5 * C064.abs(), 50, torch.float32)


def test_numpy_sddmm_in_place():
    row_ptr, col_idx, values, shape, Ad = _np_bsr()
    X, Y = _rand((50, 6), np.float32, 4), _rand((40, 6), np.float32, 5)
    out_values = np.full_like(values, np.nan)
    r = bsk.dlpack_sddmm(X, Y, row_ptr, col_idx, out_values, shape)
    assert r is out_values
    mask = Ad != 0
    X64, Y64 = torch.from_numpy(X).double(), torch.from_numpy(Y).double()
    got = bsk.BSRMatrix(torch.from_numpy(row_ptr), torch.from_numpy(col_idx), torch.from_numpy(out_values),
                        shape).to_dense()
    check_close(got, (X64 @ Y64.t()) * mask, (X64.abs() @ Y64.abs().t()) * mask, 6, torch.float32)


def test_numpy_and_torch_mixed_zero_copy():
    """A torch tensor as `out` for NumPy inputs: written in place, same storage before and after."""
    row_ptr, col_idx, values, shape, Ad = _np_bsr()
    B = _rand((40, 5), np.float32, 6)
    out = torch.full((50, 5), float("nan"))
    ptr = out.data_ptr()
    bsk.dlpack_spmm(row_ptr, col_idx, values, shape, B, out)
    assert out.data_ptr() == ptr
    B64 = torch.from_numpy(B).double()
    check_close(out, Ad @ B64, Ad.abs() @ B64.abs(), 40, torch.float32)
    # and the other way: torch.from_numpy shares memory with the NumPy output it wraps
    out_np = np.full((50, 5), np.nan, np.float32)
    view = torch.from_numpy(out_np)
    bsk.dlpack_spmm(row_ptr, col_idx, values, shape, B, view)
    assert np.isfinite(out_np).all()


def test_numpy_errors_leave_out_untouched():
    row_ptr, col_idx, values, shape, _ = _np_bsr()
    out = np.full((50, 5), 3.5, np.float32)
    with pytest.raises(bsk.BSKError) as e:
        bsk.dlpack_spmm(row_ptr, col_idx, values, shape, _rand((40, 5), np.float64, 7), out)
    assert e.value.status == "BSK_ERR_UNSUPPORTED" and "float64" in str(e.value)
    with pytest.raises(bsk.BSKError) as e:
        bsk.dlpack_spmm(row_ptr, col_idx, values, shape, np.asfortranarray(_rand((40, 5), np.float32, 8)), out)
    assert e.value.status == "BSK_ERR_BAD_LAYOUT"
    ro = _rand((40, 5), np.float32, 9)
    ro_out = out.copy()
    ro_out.flags.writeable = False
    with pytest.raises((BufferError, bsk.BSKError)):
        bsk.dlpack_spmm(row_ptr, col_idx, values, shape, ro, ro_out)
    assert (out == 3.5).all() and (ro_out == 3.5).all()


def test_validate():
    row_ptr, col_idx, values, shape, _ = _np_bsr()
    bsk.dlpack_validate(row_ptr, col_idx, values, shape)
    bad = row_ptr.copy()
    bad[-1] += 1
    with pytest.raises(bsk.BSKError) as e:
        bsk.dlpack_validate(bad, col_idx, values, shape)
    assert e.value.status == "BSK_ERR_INVALID_BSR" and e.value.code == 3


# ---------------------------------------------------------------- a producer written in Python

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class _PyProducer:
    """A DLPack producer whose deleter is Python code (a ctypes callback), as in pure-Python producers such as
    DLPack's own numpy_dlpack example. Views a C-contiguous float NumPy array; counts exports and deleter calls."""

    def __init__(self, arr):
        self.arr, self.exported, self.deleted, self._keep = arr, 0, 0, []

    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, stream=None):
        a = self.arr
        shape = (ctypes.c_int64 * a.ndim)(*a.shape)
        mt = _DLManagedTensor()
        mt.dl_tensor.data = a.ctypes.data
        mt.dl_tensor.device = _DLDevice(1, 0)
        mt.dl_tensor.ndim = a.ndim
        mt.dl_tensor.dtype = _DLDataType(2, a.dtype.itemsize * 8, 1)
        mt.dl_tensor.shape = shape

        def deleter(_):
            self.deleted += 1

        mt.deleter = _DELETER(deleter)
        self._keep.append((shape, mt, mt.deleter))
        self.exported += 1
        return _capsule_new(ctypes.addressof(mt), b"dltensor", None)


def test_python_deleters_run_once_and_errors_survive_them():
    """The producer's deleter runs exactly once per export, on success and on every error path, and an error raised
    before it (BSKError, or the producer's own exception) is what the caller gets: the deleter must not run with
    that exception pending (a Python deleter then fails, leaking the producer's memory, and the error is lost)."""
    row_ptr, col_idx, values, shape, Ad = _np_bsr()
    B = _rand((40, 5), np.float32, 10)
    out = np.full((50, 5), 3.5, np.float32)
    pB, pOut = _PyProducer(B), _PyProducer(out)
    bsk.dlpack_spmm(row_ptr, col_idx, values, shape, pB, pOut)
    assert (pB.exported, pB.deleted, pOut.exported, pOut.deleted) == (1, 1, 1, 1)
    B64 = torch.from_numpy(B).double()
    check_close(torch.from_numpy(out), Ad @ B64, Ad.abs() @ B64.abs(), 40, torch.float32)

    out[:] = 3.5
    bad, pOut = _PyProducer(B.astype(np.float64)), _PyProducer(out)
    with pytest.raises(bsk.BSKError) as e:  # refused after both are borrowed
        bsk.dlpack_spmm(row_ptr, col_idx, values, shape, bad, pOut)
    assert e.value.status == "BSK_ERR_UNSUPPORTED" and "float64" in str(e.value)
    assert (bad.deleted, pOut.deleted) == (1, 1)

    class Raising:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, stream=None):
            raise BufferError("not exportable")

    pB = _PyProducer(B)
    with pytest.raises(BufferError, match="not exportable"):  # C's export fails after B's succeeded
        bsk.dlpack_spmm(row_ptr, col_idx, values, shape, pB, Raising())
    assert (pB.exported, pB.deleted) == (1, 1)
    assert (out == 3.5).all()


def test_dlpack_device_must_be_a_tuple():
    row_ptr, col_idx, values, shape, _ = _np_bsr()

    class ListDevice:
        def __dlpack_device__(self):
            return [1, 0]

        def __dlpack__(self, stream=None):
            raise AssertionError("not reached")

    out = np.full((50, 5), 3.5, np.float32)
    with pytest.raises(TypeError, match="B"):
        bsk.dlpack_spmm(row_ptr, col_idx, values, shape, ListDevice(), out)
    assert (out == 3.5).all()
