"""Gradients of sparse_mm and sddmm.

libbsk computes in fp32 at most, so torch.autograd.gradcheck runs in float32 with loosened tolerances
(eps=1e-3, atol=1e-3, rtol=1e-2) instead of its float64 defaults; the exact gradients are then checked
element by element against dense float64 autograd of the same inputs.
"""
import warnings

import pytest
import torch

import blackwellsparsek as bsk
from conftest import DEVICES, DTYPES, check_close, nonzero_uniform, random_bsr

GRADCHECK = dict(eps=1e-3, atol=1e-3, rtol=1e-2)


def _gradcheck(fn, inputs):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*double precision.*")
        assert torch.autograd.gradcheck(fn, inputs, **GRADCHECK)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("transpose", [False, True])
def test_gradcheck_sparse_mm(device, transpose):
    # Full blocks only: gradcheck would also perturb the padding of partial blocks, which is not part of
    # the matrix (test_sparse_mm_grads_match_dense checks that padding gets exactly zero gradient).
    A = random_bsr(8, 12, (4, 4), 0.6, torch.float32, device, seed=4)
    values = A.values.detach().clone().requires_grad_()
    B = nonzero_uniform((8 if transpose else 12, 3), torch.float32, device).requires_grad_()

    def f(v, b):
        return bsk.sparse_mm(bsk.BSRMatrix(A.row_ptr, A.col_idx, v, A.shape, validate=False), b,
                             transpose_a=transpose)

    _gradcheck(f, (values, B))


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck_sddmm(device):
    P = random_bsr(8, 12, (4, 4), 0.6, torch.float32, device, seed=5)
    X = nonzero_uniform((8, 5), torch.float32, device).requires_grad_()
    Y = nonzero_uniform((12, 5), torch.float32, device).requires_grad_()
    _gradcheck(lambda x, y: bsk.sddmm(x, y, P).values, (X, Y))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("transpose", [False, True])
def test_sparse_mm_grads_match_dense(device, dtype, transpose):
    rows, cols, n = 70, 50, 19
    A = random_bsr(rows, cols, (16, 16), 0.5, dtype, device, seed=11)
    values = A.values.detach().clone().requires_grad_()
    B = nonzero_uniform((rows if transpose else cols, n), dtype, device).requires_grad_()
    dC = nonzero_uniform((cols if transpose else rows, n), dtype, device)
    C = bsk.sparse_mm(bsk.BSRMatrix(A.row_ptr, A.col_idx, values, A.shape, validate=False), B, transpose_a=transpose)
    C.backward(dC)

    Ad = A.to_dense().double()
    opA = Ad.t() if transpose else Ad
    B64, dC64 = B.detach().double(), dC.double()
    # dB = op(A)ᵀ·dC
    check_close(B.grad, opA.t() @ dC64, opA.t().abs() @ dC64.abs(), dC.shape[0], dtype)
    # dA = dC·Bᵀ (or B·dCᵀ for op T), on A's kept entries only
    dA = (B64 @ dC64.t()) if transpose else (dC64 @ B64.t())
    absdA = (B64.abs() @ dC64.abs().t()) if transpose else (dC64.abs() @ B64.abs().t())
    mask = Ad != 0
    got = bsk.BSRMatrix(A.row_ptr, A.col_idx, values.grad, A.shape, validate=False).to_dense()
    check_close(got, dA * mask, absdA * mask, n, dtype)
    # Padding of the partial blocks (rows 70..79, cols 50..63) receives exactly zero gradient.
    assert values.grad.double().abs().sum() == got.double().abs().sum()


@pytest.mark.parametrize("device", DEVICES)
def test_sddmm_grads_match_dense(device):
    P = random_bsr(40, 56, (8, 8), 0.5, torch.float32, device, seed=2)
    X = nonzero_uniform((40, 6), torch.float32, device).requires_grad_()
    Y = nonzero_uniform((56, 6), torch.float32, device).requires_grad_()
    S = bsk.sddmm(X, Y, P)
    dV = nonzero_uniform(tuple(S.values.shape), torch.float32, device)
    S.values.backward(dV)
    dS = bsk.BSRMatrix(P.row_ptr, P.col_idx, dV, P.shape, validate=False).to_dense().double()
    check_close(X.grad, dS @ Y.detach().double(), dS.abs() @ Y.detach().double().abs(), 56, torch.float32)
    check_close(Y.grad, dS.t() @ X.detach().double(), dS.t().abs() @ X.detach().double().abs(), 40, torch.float32)


def test_only_b_requires_grad():
    A = random_bsr(32, 32, (8, 8), 0.5, torch.float32, "cpu")
    B = nonzero_uniform((32, 4), torch.float32, "cpu").requires_grad_()
    bsk.sparse_mm(A, B).sum().backward()
    assert B.grad is not None and A.values.grad is None
