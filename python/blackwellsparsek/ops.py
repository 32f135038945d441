"""PyTorch layer: BSRMatrix, sparse_mm / sddmm as torch.library custom ops with autograd and fake
(meta) kernels, so that they run eagerly, differentiate, and trace under torch.compile.

Every call hands the tensors' memory to libbsk through DLPack (no copies) and runs on the caller's current
CUDA stream, so it orders with surrounding torch work and can be captured in a CUDA graph.
"""

import torch
from torch.utils.weak import WeakIdKeyDictionary

from . import _bsk
from . import _dlpack
from ._bsk import BSKError

_FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_INT32_MAX = 2**31 - 1


def _pair(block_size):
    if isinstance(block_size, int):
        return block_size, block_size
    br, bc = block_size
    return int(br), int(bc)


def _to_int32(t, what):
    """torch's sparse indices are int64; libbsk's are int32. Converted once (BSRMatrix keeps the result)."""
    if t.dtype == torch.int32:
        return t.contiguous()
    if t.dtype != torch.int64:
        raise _dlpack.error("BSK_ERR_UNSUPPORTED", f"{what} has dtype {t.dtype}; indices must be int32 or int64")
    if t.numel() and (int(t.max()) > _INT32_MAX or int(t.min()) < 0):
        raise _dlpack.error("BSK_ERR_OVERFLOW", f"{what} holds values outside 0..2^31-1: they do not fit int32")
    return t.to(torch.int32).contiguous()


def _launch(fn, device, *args):
    """Run an extension call on `device`: this thread's context for it, torch's current stream. The
    tensors come from torch and their pending work is already ordered on that stream, so __dlpack__ is
    asked for no cross-stream synchronisation (-1)."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        with torch.cuda.device(index):
            stream = torch.cuda.current_stream(index).cuda_stream
            return fn(_dlpack.context(index), *args, stream=stream, dlpack_stream=-1)
    return fn(_dlpack.context(-1), *args)


def _same_device(op, **tensors):
    devices = {name: t.device for name, t in tensors.items()}
    first_name, first = next(iter(devices.items()))
    for name, dev in devices.items():
        if dev != first:
            raise _dlpack.error("BSK_ERR_WRONG_LOCATION",
                                f"{op}: operands are on different devices: {first_name} is on {first}, {name} on {dev}")


# ---------------------------------------------------------------- raw calls (no autograd)

def _spmm_into(row_ptr, col_idx, values, rows, cols, B, C, transpose, alpha=1.0, beta=0.0):
    _same_device("sparse_mm", values=values, row_ptr=row_ptr, col_idx=col_idx, B=B, out=C)
    _launch(_bsk.spmm, B.device, _bsk.OP_T if transpose else _bsk.OP_N, float(alpha), row_ptr.detach(),
            col_idx.detach(), values.detach(), rows, cols, B.detach(), float(beta), C.detach())


def _sddmm_into(X, Y, row_ptr, col_idx, values, rows, cols, alpha=1.0, beta=0.0):
    _same_device("sddmm", X=X, Y=Y, row_ptr=row_ptr, col_idx=col_idx, values=values)
    _launch(_bsk.sddmm, X.device, float(alpha), X.detach(), Y.detach(), float(beta), row_ptr.detach(),
            col_idx.detach(), values.detach(), rows, cols)


# ---------------------------------------------------------------- custom ops

@torch.library.custom_op("bsk::spmm", mutates_args=())
def _spmm_op(row_ptr: torch.Tensor, col_idx: torch.Tensor, values: torch.Tensor, B: torch.Tensor, rows: int,
             cols: int, transpose: bool) -> torch.Tensor:
    m = cols if transpose else rows
    C = torch.empty((m, B.shape[1]) if B.dim() == 2 else (m,), dtype=B.dtype, device=B.device)
    _spmm_into(row_ptr, col_idx, values, rows, cols, B, C, transpose)
    return C


@_spmm_op.register_fake
def _spmm_fake(row_ptr, col_idx, values, B, rows, cols, transpose):
    torch._check(B.dim() == 2, lambda: "sparse_mm: B must be a 2-D matrix")
    torch._check(B.shape[0] == (rows if transpose else cols),
                 lambda: f"sparse_mm: op(A) has {rows if transpose else cols} columns but B has {B.shape[0]} rows")
    return B.new_empty((cols if transpose else rows, B.shape[1]))


@torch.library.custom_op("bsk::sddmm", mutates_args=())
def _sddmm_op(X: torch.Tensor, Y: torch.Tensor, row_ptr: torch.Tensor, col_idx: torch.Tensor, rows: int, cols: int,
              block_rows: int, block_cols: int) -> torch.Tensor:
    values = torch.empty((col_idx.shape[0], block_rows, block_cols), dtype=X.dtype, device=X.device)
    _sddmm_into(X, Y, row_ptr, col_idx, values, rows, cols)
    return values


@_sddmm_op.register_fake
def _sddmm_fake(X, Y, row_ptr, col_idx, rows, cols, block_rows, block_cols):
    return X.new_empty((col_idx.shape[0], block_rows, block_cols))


def _spmm_setup(ctx, inputs, output):
    row_ptr, col_idx, values, B, rows, cols, transpose = inputs
    ctx.save_for_backward(row_ptr, col_idx, values, B)
    ctx.rows, ctx.cols, ctx.transpose = rows, cols, transpose


def _spmm_backward(ctx, dC):
    # C = op(A)·B.  dB = op(A)ᵀ·dC: the same kernel with the other op.  dA = dC·Bᵀ sampled on A's pattern
    # (op N), or B·dCᵀ (op T, since then dAᵀ = dC·Bᵀ): both an SDDMM, which never forms the dense dA.
    row_ptr, col_idx, values, B = ctx.saved_tensors
    dC = dC.contiguous()
    d_values = d_B = None
    if ctx.needs_input_grad[3]:
        d_B = _spmm_op(row_ptr, col_idx, values, dC, ctx.rows, ctx.cols, not ctx.transpose)
    if ctx.needs_input_grad[2]:
        br, bc = values.shape[1], values.shape[2]
        X, Y = (B, dC) if ctx.transpose else (dC, B)
        d_values = _sddmm_op(X, Y, row_ptr, col_idx, ctx.rows, ctx.cols, br, bc)
    return None, None, d_values, d_B, None, None, None


_spmm_op.register_autograd(_spmm_backward, setup_context=_spmm_setup)


def _sddmm_setup(ctx, inputs, output):
    X, Y, row_ptr, col_idx, rows, cols, br, bc = inputs
    ctx.save_for_backward(X, Y, row_ptr, col_idx)
    ctx.rows, ctx.cols = rows, cols


def _sddmm_backward(ctx, d_values):
    # V = S(X·Yᵀ) on the pattern P.  dX = dV·Y and dY = dVᵀ·X, dV read as the BSR matrix (P, dV).
    X, Y, row_ptr, col_idx = ctx.saved_tensors
    d_values = d_values.contiguous()
    dX = dY = None
    if ctx.needs_input_grad[0]:
        dX = _spmm_op(row_ptr, col_idx, d_values, Y.contiguous(), ctx.rows, ctx.cols, False)
    if ctx.needs_input_grad[1]:
        dY = _spmm_op(row_ptr, col_idx, d_values, X.contiguous(), ctx.rows, ctx.cols, True)
    return dX, dY, None, None, None, None, None, None


_sddmm_op.register_autograd(_sddmm_backward, setup_context=_sddmm_setup)


# ---------------------------------------------------------------- BSRMatrix

class BSRMatrix:
    """A block-sparse row matrix over torch tensors, in libbsk's (and torch's) BSR layout.

    row_ptr [mb+1] and col_idx [nnzb] are int32 (int64 input is range-checked and converted once, here);
    values is [nnzb, block_rows, block_cols] and may require grad: sparse_mm's gradient w.r.t. A lands in
    it. `shape` is (rows, cols); a last partial block row/column holds zero padding.
    """

    def __init__(self, row_ptr, col_idx, values, shape, *, validate=True):
        if values.dim() != 3:
            raise _dlpack.error("BSK_ERR_SHAPE_MISMATCH",
                                f"values must be [nnzb, block_rows, block_cols], got shape {tuple(values.shape)}")
        self.row_ptr = _to_int32(row_ptr, "row_ptr")
        self.col_idx = _to_int32(col_idx, "col_idx")
        self.values = values
        self.shape = (int(shape[0]), int(shape[1]))
        if validate:
            self.validate()

    # ---- facts
    @property
    def block_size(self):
        return int(self.values.shape[1]), int(self.values.shape[2])

    @property
    def nnzb(self):
        return int(self.values.shape[0])

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def device(self):
        return self.values.device

    @property
    def blocks_shape(self):
        """(mb, nb): block rows and block columns."""
        br, bc = self.block_size
        return -(-self.shape[0] // br), -(-self.shape[1] // bc)

    @property
    def density(self):
        mb, nb = self.blocks_shape
        return self.nnzb / (mb * nb) if mb * nb else 0.0

    def __repr__(self):
        return (f"BSRMatrix(shape={self.shape}, block_size={self.block_size}, nnzb={self.nnzb}, "
                f"density={self.density:.3f}, dtype={self.dtype}, device={self.device})")

    def validate(self):
        """Full structural check (libbsk's bsk_bsr_validate); synchronizes for CUDA tensors."""
        _same_device("BSRMatrix", values=self.values, row_ptr=self.row_ptr, col_idx=self.col_idx)
        dev = self.device
        if dev.type == "cuda":
            with torch.cuda.device(dev):
                # The library copies the indices with a synchronous copy on the default stream: let the
                # current stream's pending writes to them finish first.
                torch.cuda.current_stream().synchronize()
                _dlpack.validate(self.row_ptr, self.col_idx, self.values.detach(), self.shape)
        else:
            _dlpack.validate(self.row_ptr, self.col_idx, self.values.detach(), self.shape)
        return self

    # ---- conversions
    def to(self, *args, **kwargs):
        """Like Tensor.to: a device moves every array, a dtype applies to the values only."""
        values = self.values.to(*args, **kwargs)
        return BSRMatrix(self.row_ptr.to(values.device), self.col_idx.to(values.device), values, self.shape,
                         validate=False)

    def cuda(self, device=None):
        return self.to(torch.device("cuda") if device is None else torch.device("cuda", device)
                       if isinstance(device, int) else device)

    def cpu(self):
        return self.to("cpu")

    def detach(self):
        return BSRMatrix(self.row_ptr, self.col_idx, self.values.detach(), self.shape, validate=False)

    def requires_grad_(self, flag=True):
        self.values.requires_grad_(flag)
        return self

    def to_dense(self):
        """The dense rows x cols tensor (differentiable w.r.t. values)."""
        br, bc = self.block_size
        mb, nb = self.blocks_shape
        counts = self.row_ptr[1:] - self.row_ptr[:-1]
        block_row = torch.repeat_interleave(torch.arange(mb, device=self.device), counts.long())
        grid = self.values.new_zeros((mb, nb, br, bc))
        grid = grid.index_put((block_row, self.col_idx.long()), self.values)
        return grid.permute(0, 2, 1, 3).reshape(mb * br, nb * bc)[: self.shape[0], : self.shape[1]]

    def to_torch(self):
        """A torch.sparse_bsr_tensor sharing these arrays (requires multiples of the block size)."""
        return torch.sparse_bsr_tensor(self.row_ptr, self.col_idx, self.values, self.shape)

    def __matmul__(self, other):
        return sparse_mm(self, other)

    # ---- builders
    @classmethod
    def from_dense(cls, dense, block_size, threshold=None, density=None):
        """Cut `dense` (2-D) into blocks and keep: with `density`, the round(density * mb * nb) blocks of
        largest Frobenius norm; with `threshold`, the blocks whose norm is > threshold; with neither, every
        block holding a non-zero. The last block row/column is zero-padded. Values are detached copies."""
        if threshold is not None and density is not None:
            raise ValueError("from_dense: give threshold or density, not both")
        if dense.dim() != 2:
            raise _dlpack.error("BSK_ERR_SHAPE_MISMATCH", f"from_dense: expected a 2-D tensor, got {dense.dim()}-D")
        br, bc = _pair(block_size)
        if not (1 <= br <= 1024 and 1 <= bc <= 1024):
            raise _dlpack.error("BSK_ERR_INVALID_ARGUMENT", f"block size {br}x{bc} is out of range (1..1024)")
        rows, cols = dense.shape
        mb, nb = -(-rows // br), -(-cols // bc)
        with torch.no_grad():
            padded = torch.nn.functional.pad(dense.detach(), (0, nb * bc - cols, 0, mb * br - rows))
            blocks = padded.reshape(mb, br, nb, bc).permute(0, 2, 1, 3)  # [mb, nb, br, bc]
            if density is not None:
                if not 0.0 <= density <= 1.0:
                    raise ValueError(f"from_dense: density {density} is outside [0, 1]")
                norms = blocks.float().pow(2).sum((2, 3)).flatten()
                keep_n = min(mb * nb, max(1 if density > 0 else 0, round(density * mb * nb)))
                order = torch.argsort(norms, descending=True, stable=True)[:keep_n]
                mask = torch.zeros(mb * nb, dtype=torch.bool, device=dense.device)
                mask[order] = True
                mask = mask.reshape(mb, nb)
            elif threshold is None or threshold == 0:
                mask = (blocks != 0).flatten(2).any(2)
            else:
                mask = blocks.float().pow(2).sum((2, 3)).sqrt() > threshold
            where = mask.nonzero()  # row-major: sorted by block row, then column
            row_ptr = torch.zeros(mb + 1, dtype=torch.int32, device=dense.device)
            row_ptr[1:] = torch.cumsum(mask.sum(1), 0).to(torch.int32)
            col_idx = where[:, 1].to(torch.int32).contiguous()
            values = blocks[where[:, 0], where[:, 1]].contiguous()
        return cls(row_ptr, col_idx, values, (rows, cols), validate=False)

    @classmethod
    def from_torch(cls, t, block_size=None):
        """From a torch.sparse_bsr_tensor (indices converted to int32 once), a torch.sparse_csr_tensor
        (blocked into block_size blocks, entries summed into their block), or a strided tensor (from_dense)."""
        if t.layout == torch.sparse_bsr:
            if t.values().dim() != 3:
                raise _dlpack.error("BSK_ERR_UNSUPPORTED", "batched or hybrid BSR tensors are not supported")
            if block_size is not None and _pair(block_size) != tuple(t.values().shape[1:]):
                raise _dlpack.error("BSK_ERR_INVALID_ARGUMENT", f"block_size {_pair(block_size)} does not match the "
                                    f"BSR tensor's blocks {tuple(t.values().shape[1:])}")
            return cls(t.crow_indices(), t.col_indices(), t.values(), tuple(t.shape))
        if t.layout == torch.sparse_csr:
            if block_size is None:
                raise ValueError("from_torch: a CSR tensor needs block_size to be blocked")
            return _CSRBlocking(t, _pair(block_size)).matrix(t)
        if t.layout == torch.strided:
            if block_size is None:
                raise ValueError("from_torch: a dense tensor needs block_size")
            return cls.from_dense(t, block_size)
        raise _dlpack.error("BSK_ERR_UNSUPPORTED", f"layout {t.layout} is not supported")


class _CSRBlocking:
    """How a CSR tensor's entries fall into blocks: the BSR pattern (int32) and, per CSR entry, its flat
    position in the BSR values. Values are scattered afresh from the CSR values on each use."""

    def __init__(self, t, block_size):
        br, bc = block_size
        if not (1 <= br <= 1024 and 1 <= bc <= 1024):
            raise _dlpack.error("BSK_ERR_INVALID_ARGUMENT", f"block size {br}x{bc} is out of range (1..1024)")
        rows, cols = t.shape
        mb, nb = -(-rows // br), -(-cols // bc)
        crow, col = t.crow_indices().long(), t.col_indices().long()
        row = torch.repeat_interleave(torch.arange(rows, device=t.device), crow[1:] - crow[:-1])
        key = (row // br) * nb + col // bc
        uniq, inverse = torch.unique(key, sorted=True, return_inverse=True)
        self.row_ptr = torch.zeros(mb + 1, dtype=torch.int32, device=t.device)
        self.row_ptr[1:] = torch.cumsum(torch.bincount(uniq // nb, minlength=mb), 0).to(torch.int32)
        self.col_idx = (uniq % nb).to(torch.int32)
        self.flat = inverse * (br * bc) + (row % br) * bc + col % bc
        self.shape, self.block_size, self.nnzb = (rows, cols), (br, bc), uniq.numel()

    def matrix(self, t):
        br, bc = self.block_size
        values = t.values().new_zeros(self.nnzb * br * bc).index_add(0, self.flat, t.values())
        return BSRMatrix(self.row_ptr, self.col_idx, values.view(self.nnzb, br, bc), self.shape, validate=False)


# The int32 pattern of each torch sparse tensor passed to sparse_mm, computed once per tensor (weakly held:
# it goes with the tensor). Values are read afresh on every call. Indices changed in place afterwards are
# not noticed (torch shares one version counter between a sparse tensor's indices and values, so it
# cannot tell the two apart); build a new tensor, or a BSRMatrix, for a new pattern.
_pattern_cache = WeakIdKeyDictionary()


def _as_bsr(A, block_size):
    if isinstance(A, BSRMatrix):
        if block_size is not None and _pair(block_size) != A.block_size:
            raise _dlpack.error("BSK_ERR_INVALID_ARGUMENT",
                                f"block_size {_pair(block_size)} does not match A's blocks {A.block_size}")
        return A
    if not isinstance(A, torch.Tensor):
        raise TypeError(f"sparse_mm: A must be a bsk.BSRMatrix or a torch sparse BSR/CSR tensor, got {type(A).__name__}")
    if A.layout not in (torch.sparse_bsr, torch.sparse_csr):
        raise _dlpack.error("BSK_ERR_UNSUPPORTED", f"sparse_mm: A has layout {A.layout}; pass a torch.sparse_bsr_tensor, "
                            "a torch.sparse_csr_tensor with block_size=, or a bsk.BSRMatrix (BSRMatrix.from_dense)")
    if A.requires_grad:
        raise _dlpack.error("BSK_ERR_UNSUPPORTED", "sparse_mm: gradients w.r.t. a torch sparse tensor are not "
                            "supported; use bsk.BSRMatrix.from_torch(A) and let its .values require grad")
    hit = _pattern_cache.get(A)
    if A.layout == torch.sparse_bsr:
        if hit is None:
            hit = _pattern_cache[A] = BSRMatrix.from_torch(A)
        pattern = hit
        values = A.values()
        if block_size is not None and _pair(block_size) != tuple(values.shape[1:]):
            raise _dlpack.error("BSK_ERR_INVALID_ARGUMENT", f"block_size {_pair(block_size)} does not match the BSR "
                                f"tensor's blocks {tuple(values.shape[1:])}")
        return BSRMatrix(pattern.row_ptr, pattern.col_idx, values, pattern.shape, validate=False)
    if block_size is None:
        raise ValueError("sparse_mm: a CSR tensor A needs block_size= to be blocked")
    bs = _pair(block_size)
    if hit is None or hit.block_size != bs:
        hit = _pattern_cache[A] = _CSRBlocking(A, bs)
    return hit.matrix(A)


# ---------------------------------------------------------------- public operations

def _check_b(op, B):
    if not isinstance(B, torch.Tensor):
        raise TypeError(f"{op}: B must be a torch.Tensor, got {type(B).__name__}")
    if B.dim() != 2:
        raise _dlpack.error("BSK_ERR_SHAPE_MISMATCH", f"{op}: B must be 2-D, got shape {tuple(B.shape)}")


def sparse_mm(A, B, *, block_size=None, transpose_a=False, out=None):
    """op(A) @ B with A block-sparse and B dense (2-D, rows contiguous); op(A) is A or, with transpose_a, Aᵀ.

    A: a bsk.BSRMatrix, a torch.sparse_bsr_tensor, or a torch.sparse_csr_tensor (blocked on the fly into
    block_size blocks; the pattern is computed once per tensor). fp32 / fp16 / bf16; A and B of one dtype;
    the result has B's dtype (accumulated in fp32). Differentiable w.r.t. B and BSRMatrix.values.
    out: write the result into this tensor (no autograd), in place.
    """
    A = _as_bsr(A, block_size)
    _check_b("sparse_mm", B)
    rows, cols = A.shape
    if out is not None:
        if torch.is_grad_enabled() and (A.values.requires_grad or B.requires_grad):
            raise RuntimeError("sparse_mm(): functions with out=... arguments don't support automatic "
                               "differentiation, but one of the arguments requires grad")
        _spmm_into(A.row_ptr, A.col_idx, A.values, rows, cols, B, out, transpose_a)
        return out
    return _spmm_op(A.row_ptr, A.col_idx, A.values, B, rows, cols, bool(transpose_a))


def sddmm(X, Y, pattern):
    """(X @ Yᵀ) sampled on `pattern`'s blocks, as a new BSRMatrix with pattern's indices.

    X: rows x D, Y: cols x D, one dtype (fp32/fp16/bf16); pattern: a BSRMatrix (or torch BSR tensor) of
    rows x cols whose values are ignored. Differentiable w.r.t. X and Y."""
    P = _as_bsr(pattern, None)
    br, bc = P.block_size
    values = _sddmm_op(X, Y, P.row_ptr, P.col_idx, P.shape[0], P.shape[1], br, bc)
    return BSRMatrix(P.row_ptr, P.col_idx, values, P.shape, validate=False)


def _context_for(device):
    device = torch.device("cpu") if device is None else torch.device(device)
    if device.type == "cuda":
        return _dlpack.context(device.index if device.index is not None else torch.cuda.current_device())
    return _dlpack.context(-1)


def last_kernel(device=None):
    """Name of the kernel the last operation on this thread ran on `device` ('cpu', 'hopper-wgmma', ...)."""
    return _context_for(device).last_kernel


# ---------------------------------------------------------------- pattern cache (bsk_set_pattern_cache)

def set_pattern_cache(enable, device=None):
    """Keep the data libbsk derives from a BSR pattern (the transpose index of sparse_mm(..., transpose_a=True),
    the row-group lists of the b = 16 / 32 Hopper kernel) between calls on this thread's context for `device`
    (default: the CPU context, where it does nothing; pass 'cuda' or a CUDA device). Faster for a fixed pattern
    used again and again (a repeated b = 32 sparse_mm at 2048^3 is one kernel then: +13 to +21 % on an H200).
    Entries are keyed by the pattern tensors' addresses and sizes: call forget_patterns(device) after changing a
    pattern's row_ptr / col_idx in place, or after freeing a pattern while another may be allocated at the same
    addresses (PyTorch's caching allocator reuses freed memory). Turning it off drops the entries."""
    _context_for(device).set_pattern_cache(bool(enable))


def forget_patterns(device=None):
    """Drop every cached pattern entry of this thread's context for `device` (waits for the work that used them)."""
    _context_for(device).forget_patterns()


# ---------------------------------------------------------------- autotuning (libbsk's bsk_tune_* API)

def tune_sparse_mm(A, B, *, block_size=None, transpose_a=False, iters=10):
    """Autotune sparse_mm(A, B, transpose_a=...) on B's device for this thread.

    Times every kernel family that can run the case (`iters` runs each, round-robin in a shuffled order, L2
    flushed before each run; median) and records the fastest for the case's class — op, block shape, dtypes,
    floor(log2) of M, N and K, block density in 1/20 steps, beta = 0 — in this thread's context for the
    device: later sparse_mm calls of that class there run it (a family that cannot run a case exactly still
    declines it, so results never change). Returns {'family', 'kernel', 'ms', 'default_kernel', 'default_ms'};
    on the CPU there is one kernel: family 'cpu', nothing recorded. Keep the table with save_tune(path); load
    it with load_tune(path) or the environment variable BSK_TUNE_FILE (read by every new context).
    Synchronises the device.
    """
    A = _as_bsr(A, block_size)
    _check_b("tune_sparse_mm", B)
    rows, cols = A.shape
    out = torch.empty((cols if transpose_a else rows, B.shape[1]), dtype=B.dtype, device=B.device)
    _same_device("tune_sparse_mm", values=A.values, row_ptr=A.row_ptr, col_idx=A.col_idx, B=B)
    with torch.no_grad():
        family, kernel, ms, default_kernel, default_ms = _launch(
            _bsk.spmm_tune, B.device, _bsk.OP_T if transpose_a else _bsk.OP_N, 1.0, A.row_ptr, A.col_idx,
            A.values.detach(), rows, cols, B.detach(), 0.0, out, int(iters))
    return {"family": family, "kernel": kernel, "ms": ms, "default_kernel": default_kernel, "default_ms": default_ms}


def save_tune(path, device=None):
    """Write this thread's autotuner table for `device` (default: the CPU context; pass 'cuda' or an index's
    device for the GPU's) to `path` (a bsk tune file, as `bsk tune` writes)."""
    _context_for(device).tune_save(path)


def load_tune(path, device=None):
    """Replace this thread's autotuner table for `device` with a tune file's. A file of another GPU raises
    BSK_ERR_UNSUPPORTED, a malformed one BSK_ERR_INVALID_ARGUMENT; the table is then unchanged."""
    _context_for(device).tune_load(path)


def clear_tune(device=None):
    """Empty this thread's autotuner table for `device` (the built-in dispatch applies again)."""
    _context_for(device).tune_clear()


def tune_entries(device=None):
    """Case classes in this thread's autotuner table for `device`."""
    return _context_for(device).tune_entries


__all__ = ["BSKError", "BSRMatrix", "sparse_mm", "sddmm", "last_kernel", "tune_sparse_mm", "save_tune", "load_tune",
           "clear_tune", "tune_entries", "set_pattern_cache", "forget_patterns"]
