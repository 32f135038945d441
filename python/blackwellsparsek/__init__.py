"""BlackwellSparseK for Python: block-sparse (BSR) matrix products on NVIDIA Hopper GPUs and CPUs.

    import blackwellsparsek as bsk
    A = bsk.BSRMatrix.from_dense(w, block_size=64, density=0.25)   # or a torch.sparse_bsr_tensor
    y = bsk.sparse_mm(A, x)                                         # differentiable, torch.compile-able

Block-sparse attention (forward): bsk.block_sparse_attention(q, k, v, layout) over an AttnLayout (dense,
causal, local, from_mask, a FlexAttention BlockMask, or the top-k gate bsk.topk_block_layout /
bsk.nn.TopKBlockGate).

The PyTorch layer (BSRMatrix, sparse_mm, sddmm, nn.BSRLinear, attention) needs torch; the DLPack layer
(dlpack_spmm, dlpack_sddmm) works on any DLPack arrays (NumPy, torch, CuPy, ...) without it.
Errors from the library are BSKError (a RuntimeError) with .status ('BSK_ERR_...') and .code.
"""
from . import _bsk
from ._bsk import BSKError
from ._dlpack import sddmm as dlpack_sddmm
from ._dlpack import spmm as dlpack_spmm
from ._dlpack import validate as dlpack_validate

__version__ = _bsk.version()

try:
    import torch as _torch  # noqa: F401
except ImportError:  # the DLPack layer still works
    _torch = None

if _torch is not None:
    from . import nn
    from .attention import AttnLayout, block_scores, block_sparse_attention, topk_block_layout
    from .ops import (BSRMatrix, clear_tune, forget_patterns, last_kernel, load_tune, save_tune, sddmm,
                      set_pattern_cache, sparse_mm, tune_entries, tune_sparse_mm)


def available_ops():
    """The operations this installed package can run (its bindings of libbsk)."""
    return ["spmm", "spmm_tune", "sddmm", "bsr_validate", "attention_forward", "topk_block_layout", "attn_layout"]


def device_info():
    """libbsk's view of the CUDA device: {'available': bool, 'name', 'capability', ..., 'arch_list'}."""
    return _bsk.device_query()


__all__ = ["BSKError", "BSRMatrix", "sparse_mm", "sddmm", "nn", "available_ops", "device_info", "last_kernel",
           "dlpack_spmm", "dlpack_sddmm", "dlpack_validate", "block_sparse_attention", "topk_block_layout",
           "block_scores", "AttnLayout", "tune_sparse_mm", "save_tune", "load_tune", "clear_tune", "tune_entries",
           "set_pattern_cache", "forget_patterns"]
