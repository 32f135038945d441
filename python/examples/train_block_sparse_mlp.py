"""Train a block-sparse MLP and a sparse-attention layer for a few steps next to their dense twins and print
the measured speedups.

    python python/examples/train_block_sparse_mlp.py                 # GPU if torch sees one, else CPU
    python python/examples/train_block_sparse_mlp.py --density 0.05 --steps 20

The sparse model is made from the dense one with bsk.nn.BSRLinear.from_dense (the largest-norm blocks of
each weight are kept), so both have the same shapes; both train on the same synthetic regression task.
The attention layer (QKV projection, attention, output projection) runs bsk.block_sparse_attention over a
causal local-window layout (plus the first key block) against PyTorch's dense causal SDPA.
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


class Attention(nn.Module):
    """QKV projection -> attention -> output projection; attention is block-sparse (layout) or dense causal SDPA."""

    def __init__(self, dim, heads, layout, device, dtype):
        super().__init__()
        self.heads, self.layout = heads, layout
        self.qkv = nn.Linear(dim, 3 * dim).to(device=device, dtype=dtype)
        self.out = nn.Linear(dim, dim).to(device=device, dtype=dtype)

    def forward(self, x):
        b, s, dim = x.shape
        q, k, v = (t.contiguous() for t in self.qkv(x).view(b, s, 3, self.heads, dim // self.heads).unbind(2))
        if self.layout is not None:
            o = bsk.block_sparse_attention(q, k, v, self.layout)  # [b, s, heads, head_dim]
        else:
            o = nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                           is_causal=True).transpose(1, 2)
        return self.out(o.reshape(b, s, dim))


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
    p.add_argument("--attn-seq", type=int, default=8192 if cuda else 512)
    p.add_argument("--attn-dim", type=int, default=2048 if cuda else 256)
    p.add_argument("--attn-heads", type=int, default=16 if cuda else 4)
    p.add_argument("--attn-batch", type=int, default=2)
    p.add_argument("--attn-block", type=int, default=128)
    p.add_argument("--attn-window", type=int, default=8, help="key blocks before the diagonal kept")
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

    # sparse attention: a causal local window (plus the first key block) vs dense causal attention
    S, blk = a.attn_seq, a.attn_block
    layout = bsk.AttnLayout.local(S, S, blk, window_left=a.attn_window, global_blocks=1, causal=True, device=device)
    xa = torch.randn(a.attn_batch, S, a.attn_dim, device=device, dtype=dtype)
    ya = torch.randn(a.attn_batch, S, a.attn_dim, device=device, dtype=dtype)
    torch.manual_seed(1)
    dense_attn = Attention(a.attn_dim, a.attn_heads, None, device, dtype)
    sparse_attn = Attention(a.attn_dim, a.attn_heads, layout, device, dtype)
    sparse_attn.load_state_dict(dense_attn.state_dict())
    t_dense_a, loss_dense_a = train(dense_attn, xa, ya, a.steps, a.warmup, device)
    t_sparse_a, loss_sparse_a = train(sparse_attn, xa, ya, a.steps, a.warmup, device)
    nq = -(-S // blk)
    print(f"attention: batch {a.attn_batch}, seq {S}, {a.attn_heads} heads x {a.attn_dim // a.attn_heads}, "
          f"{blk}-blocks, window {a.attn_window} + first block ({min(a.attn_window + 2, nq)} of {nq} key blocks "
          f"per query block at most); kernel: {bsk.last_kernel(device)}")
    print(f"sparse-attention loss: {loss_sparse_a[0]:.4f} -> {loss_sparse_a[-1]:.4f} over {len(loss_sparse_a)} steps "
          f"(dense: {loss_dense_a[0]:.4f} -> {loss_dense_a[-1]:.4f})")
    print(f"attention train step: dense causal SDPA {t_dense_a * 1e3:.2f} ms, block-sparse {t_sparse_a * 1e3:.2f} ms, "
          f"speedup {t_dense_a / t_sparse_a:.2f}x")


if __name__ == "__main__":
    main()
