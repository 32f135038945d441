"""bsk.nn.BSRLinear against nn.Linear with the same (masked) dense weight."""
import pytest
import torch
from torch import nn

import blackwellsparsek as bsk
from conftest import DEVICES, DTYPES, UNIT, check_close, nonzero_uniform


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_from_dense_forward_backward(device, dtype):
    lin = nn.Linear(70, 50).to(device=device, dtype=dtype)
    layer = bsk.nn.BSRLinear.from_dense(lin, 16, density=0.5)
    assert abs(layer.density - 0.5) < 0.1
    W = layer.weight.to_dense().detach()
    # the kept blocks are the largest-norm blocks of the dense weight
    norms = nn.functional.pad(lin.weight.detach().float(), (0, 10, 0, 14)).reshape(4, 16, 5, 16).pow(2).sum((1, 3))
    kept = layer.weight.to_dense().detach().float().ne(0)
    kept = nn.functional.pad(kept, (0, 10, 0, 14)).reshape(4, 16, 5, 16).any(3).any(1)
    assert norms[kept].min() >= norms[~kept].max()

    x = nonzero_uniform((3, 5, 70), dtype, device).requires_grad_()
    y = layer(x)
    assert y.shape == (3, 5, 50) and y.dtype == dtype
    x64 = x.detach().double().reshape(15, 70)
    ref = x64 @ W.double().t() + lin.bias.detach().double()
    absref = x64.abs() @ W.double().abs().t() + lin.bias.detach().double().abs()
    # y = round(round(x·Wᵀ) + b): the product is rounded to dtype once before the bias is added.
    check_close(y.reshape(15, 50), ref, absref, 70, dtype, extra=2 * UNIT[dtype] * (x64 @ W.double().t()).abs().cpu())

    dy = nonzero_uniform((3, 5, 50), dtype, device)
    y.backward(dy)
    dy64 = dy.double().reshape(15, 50)
    check_close(x.grad.reshape(15, 70), dy64 @ W.double(), dy64.abs() @ W.double().abs(), 50, dtype)
    gW = bsk.BSRMatrix(layer.row_ptr, layer.col_idx, layer.weight_values.grad, (50, 70), validate=False).to_dense()
    mask = W != 0
    check_close(gW, (dy64.t() @ x64) * mask, (dy64.abs().t() @ x64.abs()) * mask, 15, dtype)
    b_err = (layer.bias.grad.double() - dy64.sum(0)).abs().max()
    assert b_err <= 15 * 2 * UNIT[dtype] * dy64.abs().sum(0).max() + 1e-6


@pytest.mark.parametrize("device", DEVICES)
def test_random_init_and_state_dict(device):
    layer = bsk.nn.BSRLinear(70, 45, block_size=(16, 8), density=0.3, device=device, seed=0)
    W = layer.weight.to_dense()
    assert W.shape == (45, 70)
    # padding of the partial last block row (45 -> 48) and column (70 -> 72) is zero
    v = layer.weight_values.detach()
    last_row = (layer.row_ptr[-2].item(), layer.row_ptr[-1].item())
    assert (v[last_row[0]:last_row[1], 13:, :] == 0).all()  # rows 45..47 of the last block row
    assert (v[layer.col_idx == 8][:, :, 6:] == 0).all()     # cols 70..71 of the last block column
    assert v.ne(0).sum() == W.ne(0).sum()
    bound = 1 / (layer.col_idx.numel() / 3 * 8) ** 0.5
    assert v.abs().max() <= bound
    other = bsk.nn.BSRLinear(70, 45, block_size=(16, 8), density=0.3, device=device, seed=1)
    other.load_state_dict(layer.state_dict())
    x = nonzero_uniform((4, 70), torch.float32, device)
    assert torch.equal(other(x), layer(x))
    assert "density" in repr(layer)


def test_mlp_trains():
    torch.manual_seed(0)
    mlp = nn.Sequential(bsk.nn.BSRLinear(64, 128, block_size=16, density=0.5, seed=0), nn.ReLU(),
                        bsk.nn.BSRLinear(128, 64, block_size=16, density=0.5, seed=1), nn.ReLU(),
                        bsk.nn.BSRLinear(64, 8, block_size=8, density=0.5, seed=2))
    x = torch.randn(256, 64)
    target = torch.randn(256, 8)
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-2)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = nn.functional.mse_loss(mlp(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]
