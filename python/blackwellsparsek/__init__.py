"""BlackwellSparseK for Python: block-sparse (BSR) matrix products on NVIDIA Hopper GPUs and CPUs.

    import blackwellsparsek as bsk
    A = bsk.BSRMatrix.from_dense(w, block_size=64, density=0.25)   # or a torch.sparse_bsr_tensor
    y = bsk.sparse_mm(A, x)                                         # differentiable, torch.compile-able

The PyTorch layer (BSRMatrix, sparse_mm, sddmm, nn.BSRLinear) needs torch; the DLPack layer
(dlpack_spmm, dlpack_sddmm) works on any DLPack arrays (NumPy, torch, CuPy, ...) without it.
Errors from the library are BSKError (a RuntimeError) with .status ('BSK_ERR_...') and .code.
"""
from . import _bsk
from ._bsk import BSKError
from ._dlpack import sddmm as dlpack_sddmm
from ._dlpack import spmm as dlpack_spmm
from ._dlpack import validate as dlpack_validate

__version__ = _bsk.version()

# Where the Python binding of libbsk's attention work is tracked; named in the stubs' messages.
ATTENTION_ISSUE = "the 'block-sparse attention: Python binding' issue (bsk_attention_forward, bsk_topk_block_layout)"

try:
    import torch as _torch  # noqa: F401
except ImportError:  # the DLPack layer still works
    _torch = None

if _torch is not None:
    from . import nn
    from .ops import BSRMatrix, last_kernel, sddmm, sparse_mm


def available_ops():
    """The operations this installed package can run (its bindings of libbsk)."""
    return ["spmm", "sddmm", "bsr_validate"]


def device_info():
    """libbsk's view of the CUDA device: {'available': bool, 'name', 'capability', ..., 'arch_list'}."""
    return _bsk.device_query()


def block_sparse_attention(*args, **kwargs):
    """Block-sparse attention forward: not bound in this package yet."""
    raise NotImplementedError(f"bsk.block_sparse_attention is not in this build of blackwellsparsek: see {ATTENTION_ISSUE}")


def topk_block_layout(*args, **kwargs):
    """Top-k block gate writing an attention layout: not bound in this package yet."""
    raise NotImplementedError(f"bsk.topk_block_layout is not in this build of blackwellsparsek: see {ATTENTION_ISSUE}")


__all__ = ["BSKError", "BSRMatrix", "sparse_mm", "sddmm", "nn", "available_ops", "device_info", "last_kernel",
           "dlpack_spmm", "dlpack_sddmm", "dlpack_validate", "block_sparse_attention", "topk_block_layout"]
