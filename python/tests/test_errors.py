"""Bad inputs raise a clear BSKError (status name and code) and leave the output untouched."""
import pytest
import torch

import blackwellsparsek as bsk
from conftest import DEVICES, needs_cuda, nonzero_uniform, random_bsr

SENTINEL = 7.25


def _setup(device, dtype=torch.float32):
    A = random_bsr(48, 32, (16, 16), 0.5, dtype, device)
    B = nonzero_uniform((32, 8), dtype, device)
    out = torch.full((48, 8), SENTINEL, dtype=dtype, device=device)
    return A, B, out


def _raises(status, fn, match=None):
    with pytest.raises(bsk.BSKError, match=match) as info:
        fn()
    e = info.value
    assert e.status == status, str(e)
    assert isinstance(e, RuntimeError) and isinstance(e.code, int) and e.reason
    assert status in str(e)
    return e


@pytest.mark.parametrize("device", DEVICES)
def test_wrong_dtype(device):
    A, B, out = _setup(device)
    _raises("BSK_ERR_UNSUPPORTED", lambda: bsk.sparse_mm(A, B.double(), out=out.double()), "float64")
    _raises("BSK_ERR_UNSUPPORTED", lambda: bsk.sparse_mm(A, B.half(), out=out), "same dtype")
    _raises("BSK_ERR_UNSUPPORTED", lambda: bsk.sparse_mm(A, B.to(torch.int32)), "int32")
    assert (out == SENTINEL).all()


def test_wrong_index_dtype_and_range():
    A, B, out = _setup("cpu")
    e = _raises("BSK_ERR_UNSUPPORTED",
                lambda: bsk.dlpack_spmm(A.row_ptr.long(), A.col_idx, A.values, A.shape, B, out), "int32")
    assert e.code == 5
    _raises("BSK_ERR_OVERFLOW", lambda: bsk.BSRMatrix(A.row_ptr.long(), A.col_idx.long() + 2**31, A.values, A.shape))
    _raises("BSK_ERR_UNSUPPORTED", lambda: bsk.BSRMatrix(A.row_ptr.short(), A.col_idx, A.values, A.shape))
    assert (out == SENTINEL).all()


@pytest.mark.parametrize("device", DEVICES)
def test_shape_mismatch(device):
    A, B, out = _setup(device)
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: bsk.sparse_mm(A, B[:31]), "B has 31 rows")
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: bsk.sparse_mm(A, B, out=out[:47]), "C is 47x8")
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: bsk.sparse_mm(A, B, transpose_a=True, out=out))
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: bsk.sparse_mm(A, B[0]))
    X = nonzero_uniform((48, 4), torch.float32, device)
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: bsk.sddmm(X, X, A), "sddmm")
    assert (out == SENTINEL).all()


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous(device):
    A, B, out = _setup(device)
    wide = nonzero_uniform((32, 16), torch.float32, device)
    _raises("BSK_ERR_BAD_LAYOUT", lambda: bsk.sparse_mm(A, wide[:, ::2], out=out), "inner stride 2")
    _raises("BSK_ERR_BAD_LAYOUT", lambda: bsk.sparse_mm(A, nonzero_uniform((8, 32), torch.float32, device).t(),
                                                        out=out), "contiguous")
    outT = torch.full((8, 48), SENTINEL, device=device)
    _raises("BSK_ERR_BAD_LAYOUT", lambda: bsk.sparse_mm(A, B, out=outT.t()))
    assert (outT == SENTINEL).all()
    strided_values = torch.cat([A.values, A.values], 2)[:, :, :16]
    bad = bsk.BSRMatrix(A.row_ptr, A.col_idx, strided_values, A.shape, validate=False)
    _raises("BSK_ERR_BAD_LAYOUT", lambda: bsk.sparse_mm(bad, B, out=out), "values must be contiguous")
    assert (out == SENTINEL).all()


@pytest.mark.parametrize("device", DEVICES)
def test_mismatched_block_sizes(device):
    A, B, out = _setup(device)
    _raises("BSK_ERR_INVALID_ARGUMENT", lambda: bsk.sparse_mm(A, B, block_size=8, out=out), "block_size")
    At = A.to_torch()
    _raises("BSK_ERR_INVALID_ARGUMENT", lambda: bsk.sparse_mm(At, B, block_size=(8, 16), out=out), "block_size")
    # values whose blocks do not fit row_ptr's count of block rows
    v8 = A.values.reshape(-1, 8, 32)
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: bsk.dlpack_spmm(A.row_ptr, A.col_idx, v8, A.shape, B, out), "row_ptr")
    assert (out == SENTINEL).all()


def test_device_mismatch_cpu_meta():
    A, B, out = _setup("cpu")
    _raises("BSK_ERR_WRONG_LOCATION", lambda: bsk.sparse_mm(A, B, out=out.to("meta")), "different devices")
    assert (out == SENTINEL).all()


@needs_cuda
def test_device_mismatch_cuda():
    A, B, out = _setup("cpu")
    _raises("BSK_ERR_WRONG_LOCATION", lambda: bsk.sparse_mm(A.cuda(), B, out=out), "different devices")
    _raises("BSK_ERR_WRONG_LOCATION", lambda: bsk.dlpack_spmm(A.row_ptr, A.col_idx, A.values, A.shape, B.cuda(), out),
            "different devices")
    assert (out == SENTINEL).all()


def test_malformed_pattern():
    A, B, out = _setup("cpu")
    col = A.col_idx.clone()
    col[:2] = col[:2].flip(0) if A.row_ptr[1] >= 2 else torch.tensor([1, 1], dtype=torch.int32)
    _raises("BSK_ERR_INVALID_BSR", lambda: bsk.BSRMatrix(A.row_ptr, col, A.values, A.shape))
    # Unchecked construction: the library's host path still rejects it, before writing.
    bad = bsk.BSRMatrix(A.row_ptr, col, A.values, A.shape, validate=False)
    _raises("BSK_ERR_INVALID_BSR", lambda: bsk.sparse_mm(bad, B, out=out))
    assert (out == SENTINEL).all()


def test_not_a_tensor_and_bad_layout():
    A, B, out = _setup("cpu")
    with pytest.raises(TypeError, match="DLPack"):
        bsk.dlpack_spmm(A.row_ptr, A.col_idx, A.values, A.shape, [[1.0]], out)
    with pytest.raises(TypeError):
        bsk.sparse_mm("A", B)
    _raises("BSK_ERR_UNSUPPORTED", lambda: bsk.sparse_mm(A.to_dense(), B), "layout")
    At = A.to_torch().requires_grad_()
    _raises("BSK_ERR_UNSUPPORTED", lambda: bsk.sparse_mm(At, B), "BSRMatrix.from_torch")


def test_out_with_autograd_refused():
    A, B, out = _setup("cpu")
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        bsk.sparse_mm(A, B.requires_grad_(), out=out)
    assert (out == SENTINEL).all()


def test_output_aliasing_input_refused():
    A = random_bsr(32, 32, (16, 16), 0.5, torch.float32, "cpu")
    B = nonzero_uniform((32, 32), torch.float32, "cpu")
    keep = B.clone()
    _raises("BSK_ERR_INVALID_ARGUMENT", lambda: bsk.sparse_mm(A, B, out=B))
    assert torch.equal(B, keep)


def test_sizes_past_the_limits_raise_overflow():
    """bsk.h: sizes past the limits get BSK_ERR_OVERFLOW, never a wrapped size. The extension multiplies the sizes it
    is given (a matrix shape, a layout's seq lengths, batch, heads, capacity) before libbsk sees them: those
    products must not wrap (to a negative count, or one that an array's length happens to match)."""
    from blackwellsparsek import _bsk
    A, B, out = _setup("cpu")
    for shape in ((2**63 - 1, 32), (48, 2**31)):
        _raises("BSK_ERR_OVERFLOW", lambda: bsk.dlpack_spmm(A.row_ptr, A.col_idx, A.values, shape, B, out))
    mask16, none = torch.ones(16, dtype=torch.bool), torch.zeros(0, dtype=torch.bool)
    # 4 x 2^62 query blocks x 4 key blocks wraps to 0; 2^32 x 2^32 blocks to 0, the empty mask's size
    _raises("BSK_ERR_OVERFLOW", lambda: _bsk.attn_layout_from_mask(2**62, 4, 1, 1, 4, 1, mask16, False, 0))
    _raises("BSK_ERR_OVERFLOW", lambda: _bsk.attn_layout_from_mask(2**63 - 1, 1, 2, 1, 1, 1, none, False, 0))
    _raises("BSK_ERR_OVERFLOW", lambda: _bsk.attn_layout_from_mask(2**32, 2**32, 1, 1, 1, 1, none, False, 0))
    z = torch.zeros(0, dtype=torch.int32)
    for seq_q, block_q, batch, heads in ((2**63 - 1, 2, 1, 1), (2**22, 1, 2**21, 2**21)):
        lay = (seq_q, 1, block_q, 1, batch, heads, 0, z, z, z, z)
        _raises("BSK_ERR_OVERFLOW", lambda: _bsk.attn_layout_tiles(lay))
    assert (out == SENTINEL).all()


def test_status_string_of_a_code_past_int():
    from blackwellsparsek import _bsk
    assert _bsk.status_string(3) != _bsk.status_string(-1)  # a real status has its own text
    for code in (2**32, 2**32 + 3, -2**40):  # not statuses: no truncation to one (0 is BSK_SUCCESS)
        assert _bsk.status_string(code) == _bsk.status_string(-1)
