"""Train a block-sparse MLP for a few steps next to its dense twin and print the measured speedup.

    python python/examples/train_block_sparse_mlp.py                 # GPU if torch sees one, else CPU
    python python/examples/train_block_sparse_mlp.py --density 0.05 --steps 20

The sparse model is made from the dense one with bsk.nn.BSRLinear.from_dense (the largest-norm blocks of
each weight are kept), so both have the same shapes; both train on the same synthetic regression task.
Times are per training step (forward, backward, optimizer), medians over --steps timed steps.
"""
import argparse
import statistics
import time

import torch
from torch import nn

import blackwellsparsek as bsk


def mlp(dim, hidden, layers, device, dtype):
    mods = []
    for i in range(layers):
        mods += [nn.Linear(dim if i == 0 else hidden, hidden), nn.GELU()]
    mods.append(nn.Linear(hidden, dim))
    return nn.Sequential(*mods).to(device=device, dtype=dtype)


def sparsify(model, block, density):
    """Swap every nn.Linear for a BSRLinear keeping `density` of its blocks (the largest-norm ones)."""
    return nn.Sequential(*[bsk.nn.BSRLinear.from_dense(m, block, density) if isinstance(m, nn.Linear) else m
                           for m in model])


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def train(model, x, y, steps, warmup, device):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    times, losses = [], []
    for i in range(warmup + steps):
        sync(device)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(x).float(), y.float())
        loss.backward()
        opt.step()
        sync(device)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    return statistics.median(times), losses


def main():
    cuda = torch.cuda.is_available()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda" if cuda else "cpu")
    p.add_argument("--dim", type=int, default=4096 if cuda else 512)
    p.add_argument("--hidden", type=int, default=16384 if cuda else 2048)
    p.add_argument("--layers", type=int, default=2, help="hidden layers")
    p.add_argument("--batch", type=int, default=8192 if cuda else 256)
    p.add_argument("--block", type=int, default=64 if cuda else 32)
    p.add_argument("--density", type=float, default=0.1)
    p.add_argument("--dtype", default="bfloat16" if cuda else "float32", choices=["float32", "float16", "bfloat16"])
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    device, dtype = torch.device(a.device), getattr(torch, a.dtype)

    torch.manual_seed(0)
    teacher = mlp(a.dim, a.hidden // 4, 1, device, dtype)
    x = torch.randn(a.batch, a.dim, device=device, dtype=dtype)
    with torch.no_grad():
        y = teacher(x)
        y = (y - y.mean()) / y.std()  # unit-variance targets: the losses start near 1

    dense = mlp(a.dim, a.hidden, a.layers, device, dtype)
    sparse = sparsify(dense, a.block, a.density)
    t_dense, loss_dense = train(dense, x, y, a.steps, a.warmup, device)
    t_sparse, loss_sparse = train(sparse, x, y, a.steps, a.warmup, device)

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    kept = [m.density for m in sparse if isinstance(m, bsk.nn.BSRLinear)]
    print(f"device: {name} ({a.dtype}); MLP {a.dim} -> {a.layers} x {a.hidden} -> {a.dim}, batch {a.batch}")
    print(f"block-sparse weights: {a.block}x{a.block} blocks, density {min(kept):.3f}..{max(kept):.3f}; "
          f"kernel: {bsk.last_kernel(device)}")
    print(f"sparse loss: {loss_sparse[0]:.4f} -> {loss_sparse[-1]:.4f} over {len(loss_sparse)} steps "
          f"(dense: {loss_dense[0]:.4f} -> {loss_dense[-1]:.4f})")
    print(f"train step: dense {t_dense * 1e3:.2f} ms, block-sparse {t_sparse * 1e3:.2f} ms, "
          f"speedup {t_dense / t_sparse:.2f}x")


if __name__ == "__main__":
    main()
