"""sparse_mm / sddmm / BSRLinear under torch.compile: the custom ops' fake kernels let them trace, and the
compiled forward and backward match eager. Backend aot_eager (traces forward and backward graphs without
needing a C++ compiler for inductor)."""
import pytest
import torch

import blackwellsparsek as bsk
from conftest import DEVICES, nonzero_uniform, random_bsr


@pytest.mark.parametrize("device", DEVICES)
def test_compile_sparse_mm_forward_backward(device):
    torch._dynamo.reset()
    A = random_bsr(48, 40, (8, 8), 0.5, torch.float32, device)
    shape = A.shape

    def f(row_ptr, col_idx, values, B):
        C = bsk.sparse_mm(bsk.BSRMatrix(row_ptr, col_idx, values, shape, validate=False), B)
        return torch.relu(C).sum() + bsk.sparse_mm(bsk.BSRMatrix(row_ptr, col_idx, values, shape, validate=False),
                                                   C, transpose_a=True).square().mean()

    compiled = torch.compile(f, backend="aot_eager", fullgraph=True)
    B = nonzero_uniform((40, 12), torch.float32, device)
    grads = []
    for fn in (f, compiled):
        v = A.values.detach().clone().requires_grad_()
        b = B.clone().requires_grad_()
        out = fn(A.row_ptr, A.col_idx, v, b)
        out.backward()
        grads.append((out.detach(), v.grad, b.grad))
    for e, c in zip(*grads):
        torch.testing.assert_close(c, e, rtol=1e-5, atol=1e-5)


def test_compile_sddmm_and_module():
    torch._dynamo.reset()
    P = random_bsr(32, 24, (8, 8), 0.5, torch.float32, "cpu")

    def g(X, Y):
        return bsk.sddmm(X, Y, P).values.sum()

    X = nonzero_uniform((32, 5), torch.float32, "cpu")
    Y = nonzero_uniform((24, 5), torch.float32, "cpu")
    torch.testing.assert_close(torch.compile(g, backend="aot_eager", fullgraph=True)(X, Y), g(X, Y))

    layer = bsk.nn.BSRLinear(40, 24, block_size=8, density=0.5, seed=0)
    x = nonzero_uniform((6, 40), torch.float32, "cpu")
    cl = torch.compile(layer, backend="aot_eager")
    torch.testing.assert_close(cl(x), layer(x))


def test_fake_kernel_shapes():
    """register_fake gives the right output shapes without running the library (meta tensors)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    A = random_bsr(48, 40, (8, 8), 0.5, torch.float32, "cpu")
    with FakeTensorMode() as mode:
        rp, ci, v = (mode.from_tensor(t) for t in (A.row_ptr, A.col_idx, A.values))
        B = torch.empty(40, 7)
        C = torch.ops.bsk.spmm(rp, ci, v, B, 48, 40, False)
        assert C.shape == (48, 7)
        CT = torch.ops.bsk.spmm(rp, ci, v, torch.empty(48, 3), 48, 40, True)
        assert CT.shape == (40, 3)
        S = torch.ops.bsk.sddmm(torch.empty(48, 4), torch.empty(40, 4), rp, ci, 48, 40, 8, 8)
        assert S.shape == tuple(A.values.shape)
