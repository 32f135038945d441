"""The framework-free layer: libbsk's operations over any DLPack arrays (NumPy, torch, CuPy, ...).

Nothing here imports torch. Results are written in place into the arrays given (zero copies): the
arrays' memory is handed to the library through DLPack.
"""
import atexit
import threading
import weakref

from . import _bsk
from ._bsk import BSKError

_local = threading.local()


class _Contexts:
    """One thread's contexts, by device index (an object, so that it can be weakly referenced)."""

    def __init__(self):
        self.by_device = {}


_all_contexts = weakref.WeakSet()  # live threads' contexts, so that exit can release them


@atexit.register
def _release_contexts():
    # Destroy the contexts while the CUDA runtime is still up: Python's exit handlers run before the C
    # library's, where the (static) CUDA runtime tears itself down.
    for ctxs in list(_all_contexts):
        ctxs.by_device.clear()


def context(device_index=-1):
    """This thread's bsk context for a CUDA device index (-1: host). A bsk_context is not thread-safe and
    keeps per-device state, hence one per (thread, device)."""
    ctxs = getattr(_local, "ctxs", None)
    if ctxs is None:
        ctxs = _local.ctxs = _Contexts()
        _all_contexts.add(ctxs)
    ctx = ctxs.by_device.get(device_index)
    if ctx is None:
        ctx = ctxs.by_device[device_index] = _bsk.Context(_bsk.BACKEND_AUTO)
    return ctx


def error(status, message):
    """A BSKError for a bsk_status name ('BSK_ERR_SHAPE_MISMATCH') or code, raised by the Python layer for
    checks it makes itself, so that every bad input surfaces as the same exception class."""
    code = status if isinstance(status, int) else next(k for k, v in _bsk.STATUS_NAMES.items() if v == status)
    return _bsk.make_error(code, message)


def _device_index(arr):
    if not hasattr(arr, "__dlpack_device__"):
        return -1  # the extension raises the TypeError that names the argument
    dev_type, dev_id = arr.__dlpack_device__()
    return dev_id if dev_type in (2, 13) else -1  # kDLCUDA, kDLCUDAManaged


def _streams(stream):
    # DLPack spells the legacy default stream 1 (0 is ambiguous there); libbsk spells it NULL.
    if stream is None or stream == 0:
        return 0, 1
    return stream, stream


def spmm(row_ptr, col_idx, values, shape, B, C, *, transpose_a=False, alpha=1.0, beta=0.0, stream=None):
    """C = alpha * op(A) @ B + beta * C, in place, for DLPack arrays.

    A is the BSR matrix of `shape` (rows, cols) given by row_ptr [mb+1] int32, col_idx [nnzb] int32 and
    values [nnzb, block_rows, block_cols]; op(A) is A, or A transposed when transpose_a. B and C are 2-D
    row-major (inner stride 1). Device arrays run on `stream` (a cudaStream_t as int; None: the legacy
    default stream), handed to each array's __dlpack__ so its producer orders pending work before it.
    Returns C.
    """
    launch, dl = _streams(stream)
    _bsk.spmm(context(_device_index(B)), _bsk.OP_T if transpose_a else _bsk.OP_N, float(alpha), row_ptr, col_idx,
              values, int(shape[0]), int(shape[1]), B, float(beta), C, stream=launch, dlpack_stream=dl)
    return C


def sddmm(X, Y, row_ptr, col_idx, values, shape, *, alpha=1.0, beta=0.0, stream=None):
    """values = alpha * (X @ Y^T) sampled on the BSR pattern (row_ptr, col_idx) of `shape` + beta * values,
    in place. X: rows x D, Y: cols x D, values [nnzb, block_rows, block_cols] (float32 or X's dtype).
    Returns values."""
    launch, dl = _streams(stream)
    _bsk.sddmm(context(_device_index(X)), float(alpha), X, Y, float(beta), row_ptr, col_idx, values,
               int(shape[0]), int(shape[1]), stream=launch, dlpack_stream=dl)
    return values


def validate(row_ptr, col_idx, values, shape):
    """Full structural check of a BSR matrix (synchronizes for device arrays); raises BSKError."""
    _bsk.bsr_validate(row_ptr, col_idx, values, int(shape[0]), int(shape[1]), dlpack_stream=1)


__all__ = ["BSKError", "context", "error", "spmm", "sddmm", "validate"]
