"""sparse_mm / sddmm against the float64 dense reference, every dtype, CPU and (when present) CUDA."""
import pytest
import torch

import blackwellsparsek as bsk
from conftest import DEVICES, DTYPES, check_close, nonzero_uniform, random_bsr

# (rows, cols, block): square and rectangular blocks, partial last blocks, a single block.
SHAPES = [(64, 96, (16, 16)), (70, 50, (16, 16)), (48, 40, (8, 32)), (7, 5, (4, 4)), (128, 128, (64, 64))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows,cols,block", SHAPES)
@pytest.mark.parametrize("transpose", [False, True])
def test_sparse_mm_matches_dense(device, dtype, rows, cols, block, transpose):
    A = random_bsr(rows, cols, block, 0.4, dtype, device, seed=rows + cols)
    k = rows if transpose else cols
    B = nonzero_uniform((k, 33), dtype, device)
    C = bsk.sparse_mm(A, B, transpose_a=transpose)
    assert C.dtype == dtype and C.device.type == device
    Ad = A.to_dense().double()
    Ad = Ad.t() if transpose else Ad
    check_close(C, Ad @ B.double(), Ad.abs() @ B.double().abs(), k, dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sparse_mm_out_written_in_place(device, dtype):
    A = random_bsr(70, 50, (16, 16), 0.5, dtype, device)
    B = nonzero_uniform((50, 20), dtype, device)
    # out is a column slice of a larger buffer: its row stride (ld) is 32, and the columns around it
    # must stay as they were.
    buf = torch.full((70, 32), float("nan"), dtype=dtype, device=device)
    out = buf[:, 4:24]
    ptr = out.data_ptr()
    r = bsk.sparse_mm(A, B, out=out)
    assert r is out and out.data_ptr() == ptr
    Ad = A.to_dense().double()
    check_close(out, Ad @ B.double(), Ad.abs() @ B.double().abs(), 50, dtype)
    assert torch.isnan(buf[:, :4]).all() and torch.isnan(buf[:, 24:]).all()


@pytest.mark.parametrize("device", DEVICES)
def test_row_stride_input(device):
    """B with a row stride larger than its width (a column slice) is read in place."""
    A = random_bsr(40, 64, (16, 16), 0.5, torch.float32, device)
    big = nonzero_uniform((64, 50), torch.float32, device)
    B = big[:, 3:40]
    C = bsk.sparse_mm(A, B)
    Ad = A.to_dense().double()
    check_close(C, Ad @ B.double(), Ad.abs() @ B.double().abs(), 64, torch.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows,cols,block", SHAPES[:4])
def test_sddmm_matches_dense(device, dtype, rows, cols, block):
    P = random_bsr(rows, cols, block, 0.4, dtype, device, seed=7)
    X = nonzero_uniform((rows, 24), dtype, device)
    Y = nonzero_uniform((cols, 24), dtype, device)
    S = bsk.sddmm(X, Y, P)
    assert S.values.dtype == dtype and S.nnzb == P.nnzb
    assert torch.equal(S.row_ptr, P.row_ptr) and torch.equal(S.col_idx, P.col_idx)
    mask = P.to_dense() != 0  # random_bsr has no zeros inside kept blocks
    ref = (X.double() @ Y.double().t()) * mask
    absref = (X.double().abs() @ Y.double().abs().t()) * mask
    check_close(S.to_dense(), ref, absref, 24, dtype)
    # padding of partial blocks stays zero
    br, bc = block
    if rows % br or cols % bc:
        full = S.to(torch.float64)
        assert full.values.abs().sum() == full.to_dense().abs().sum()


@pytest.mark.parametrize("device", DEVICES)
def test_dlpack_sddmm_beta_accumulates(device):
    P = random_bsr(32, 48, (16, 16), 0.5, torch.float32, device)
    X = nonzero_uniform((32, 8), torch.float32, device)
    Y = nonzero_uniform((48, 8), torch.float32, device)
    values = P.values.clone()
    bsk.dlpack_sddmm(X, Y, P.row_ptr, P.col_idx, values, P.shape, alpha=2.0, beta=0.5,
                     stream=torch.cuda.current_stream().cuda_stream if device == "cuda" else None)
    if device == "cuda":
        torch.cuda.synchronize()
    mask = P.to_dense() != 0
    want = 2.0 * (X.double() @ Y.double().t()) * mask + 0.5 * P.to_dense().double()
    got = bsk.BSRMatrix(P.row_ptr, P.col_idx, values, P.shape).to_dense()
    absref = 2.0 * (X.double().abs() @ Y.double().abs().t()) * mask + 0.5 * P.to_dense().double().abs()
    check_close(got, want, absref, 8, torch.float32)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_torch_bsr_input(device, dtype):
    dense = nonzero_uniform((64, 48), dtype, "cpu")
    dense[16:32, :] = 0  # an empty block row
    At = dense.to(device).to_sparse_bsr((16, 16))
    B = nonzero_uniform((48, 10), dtype, device)
    C = bsk.sparse_mm(At, B)
    check_close(C, dense.double() @ B.double().cpu(), dense.double().abs() @ B.double().abs().cpu(), 48, dtype)
    # The int32 pattern is computed once per tensor and reused; values are read afresh.
    row_ptr = bsk.ops._pattern_cache[At].row_ptr
    assert row_ptr.dtype == torch.int32
    with torch.no_grad():
        At.values().mul_(2)
    C2 = bsk.sparse_mm(At, B)
    assert bsk.ops._pattern_cache[At].row_ptr is row_ptr
    check_close(C2, 2 * dense.double() @ B.double().cpu(), 2 * dense.double().abs() @ B.double().abs().cpu(), 48,
                dtype)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_csr_input_blocked(device):
    dense = nonzero_uniform((50, 40), torch.float32, "cpu")
    dense[torch.rand(50, 40) < 0.8] = 0
    Acsr = dense.to_sparse_csr().to(device)
    B = nonzero_uniform((40, 6), torch.float32, device)
    C = bsk.sparse_mm(Acsr, B, block_size=(8, 16))
    check_close(C, dense.double() @ B.double().cpu(), dense.double().abs() @ B.double().abs().cpu(), 40,
                torch.float32)
    M = bsk.BSRMatrix.from_torch(Acsr, block_size=(8, 16))
    assert M.block_size == (8, 16)
    assert torch.equal(M.to_dense().cpu(), dense)


@pytest.mark.parametrize("device", DEVICES)
def test_bsr_matrix_roundtrip_and_builders(device):
    dense = nonzero_uniform((37, 45), torch.float32, device)
    dense[:16, 16:32] = 0
    A = bsk.BSRMatrix.from_dense(dense, 16)
    assert A.nnzb == 3 * 3 - 1 and torch.equal(A.to_dense(), dense)
    assert A.row_ptr.dtype == torch.int32 and A.col_idx.dtype == torch.int32
    # density keeps the largest-norm blocks: scale block (2, 1) up, it must be the one kept.
    d2 = dense.clone()
    d2[32:, 16:32] *= 100
    top = bsk.BSRMatrix.from_dense(d2, 16, density=1 / 9)
    assert top.nnzb == 1 and top.col_idx.tolist() == [1] and top.row_ptr.tolist() == [0, 0, 0, 1]
    # threshold on the Frobenius norm
    norms = d2.new_zeros(3, 3)
    for i in range(3):
        for j in range(3):
            norms[i, j] = d2[16 * i:16 * i + 16, 16 * j:16 * j + 16].norm()
    s = norms.flatten().sort().values
    t = float(s[4] + s[5]) / 2  # midway between two norms: no rounding tie
    assert bsk.BSRMatrix.from_dense(d2, 16, threshold=t).nnzb == int((norms > t).sum())
    # torch interop: to_torch / from_torch on multiples of the block size
    sq = bsk.BSRMatrix.from_dense(dense[:32, :32], 16)
    assert torch.equal(bsk.BSRMatrix.from_torch(sq.to_torch()).to_dense(), dense[:32, :32])


def test_available_ops():
    ops = bsk.available_ops()
    assert {"spmm", "sddmm", "attention_forward", "topk_block_layout"} <= set(ops)
    assert callable(bsk.block_sparse_attention) and callable(bsk.topk_block_layout)


def test_last_kernel_reports_cpu():
    A = random_bsr(32, 32, (16, 16), 0.5, torch.float32, "cpu")
    bsk.sparse_mm(A, nonzero_uniform((32, 4), torch.float32, "cpu"))
    assert bsk.last_kernel() == "cpu"


@pytest.mark.parametrize("device", DEVICES)
def test_threads_get_their_own_contexts(device):
    """Each thread uses its own bsk context (they are not thread-safe); results agree with one thread's."""
    import threading

    A = random_bsr(96, 80, (16, 16), 0.5, torch.float32, device)
    B = nonzero_uniform((80, 24), torch.float32, device)
    ref = bsk.sparse_mm(A, B)
    results, errors = [], []

    def work():
        try:
            for _ in range(10):
                results.append(torch.equal(bsk.sparse_mm(A, B), ref))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(results) == 40 and all(results)
