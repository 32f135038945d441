"""bsk.nn.BSRLinear (a drop-in for torch.nn.Linear whose weight is block-sparse) and bsk.nn.TopKBlockGate (the
top-k block gate choosing a block-sparse attention layout from Q and K)."""
import math

import torch
from torch import nn

from .attention import _order, block_scores, topk_block_layout
from .ops import BSRMatrix, _pair, sparse_mm


def _random_pattern(out_features, in_features, block_size, density, generator, device):
    """A uniform random pattern: each block row keeps round(density * nb) blocks (at least one)."""
    br, bc = block_size
    mb, nb = -(-out_features // br), -(-in_features // bc)
    per_row = min(nb, max(1, round(density * nb)))
    scores = torch.rand((mb, nb), generator=generator)
    cols = torch.sort(torch.topk(scores, per_row, dim=1).indices, dim=1).values
    row_ptr = torch.arange(0, (mb + 1) * per_row, per_row, dtype=torch.int32)
    return row_ptr.to(device), cols.flatten().to(torch.int32).to(device)


class BSRLinear(nn.Module):
    """y = x @ Wᵀ + b with W (out_features x in_features) block-sparse in BSR form.

    The kept blocks' values are the parameter `weight_values` [nnzb, block_rows, block_cols]; the pattern
    (`row_ptr`, `col_idx`, int32) is a buffer, fixed for the layer's life. Build one from a trained
    nn.Linear with BSRLinear.from_dense(linear, block_size, density) (keeps the largest-norm blocks), or
    fresh with a random pattern of the given density.

    The product runs as W·xᵀ (the sparse operand is the left one), so the layer transposes its input and
    returns a transposed view: between two BSRLinear layers (with element-wise ops in between) those
    transposes cancel and no copy is made.
    """

    def __init__(self, in_features, out_features, bias=True, *, block_size=32, density=0.25, device=None,
                 dtype=None, seed=None):
        super().__init__()
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.block_size = _pair(block_size)
        gen = torch.Generator().manual_seed(seed) if seed is not None else None
        row_ptr, col_idx = _random_pattern(self.out_features, self.in_features, self.block_size, density, gen, device)
        self.register_buffer("row_ptr", row_ptr)
        self.register_buffer("col_idx", col_idx)
        br, bc = self.block_size
        self.weight_values = nn.Parameter(torch.empty((col_idx.numel(), br, bc), device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.empty(self.out_features, device=device, dtype=dtype)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        # nn.Linear's init, U(-1/sqrt(fan_in), 1/sqrt(fan_in)), with the fan-in a row actually has.
        mb = self.row_ptr.numel() - 1
        fan_in = max(1.0, self.col_idx.numel() / max(mb, 1) * self.block_size[1])
        bound = 1.0 / math.sqrt(fan_in)
        with torch.no_grad():
            self.weight_values.uniform_(-bound, bound)
            self._zero_padding()
            if self.bias is not None:
                self.bias.uniform_(-bound, bound)

    def _zero_padding(self):
        # Entries of a partial last block row/column lie outside W: libbsk requires them zero.
        br, bc = self.block_size
        pad_r, pad_c = (-self.out_features) % br, (-self.in_features) % bc
        if not (pad_r or pad_c):
            return
        mb, nb = -(-self.out_features // br), -(-self.in_features // bc)
        counts = (self.row_ptr[1:] - self.row_ptr[:-1]).long()
        brow = torch.repeat_interleave(torch.arange(mb, device=counts.device), counts)
        if pad_r:
            self.weight_values[brow == mb - 1, br - pad_r:, :] = 0
        if pad_c:
            self.weight_values[self.col_idx.long() == nb - 1, :, bc - pad_c:] = 0

    @classmethod
    def from_dense(cls, linear, block_size, density):
        """A BSRLinear keeping the round(density * blocks) blocks of linear.weight with the largest norms."""
        A = BSRMatrix.from_dense(linear.weight.detach(), block_size, density=density)
        layer = cls.__new__(cls)
        nn.Module.__init__(layer)
        layer.in_features, layer.out_features = linear.in_features, linear.out_features
        layer.block_size = A.block_size
        layer.register_buffer("row_ptr", A.row_ptr)
        layer.register_buffer("col_idx", A.col_idx)
        layer.weight_values = nn.Parameter(A.values.clone())
        layer.bias = nn.Parameter(linear.bias.detach().clone()) if linear.bias is not None else None
        return layer

    @property
    def weight(self):
        """The weight as a BSRMatrix sharing this layer's arrays (gradients reach weight_values)."""
        return BSRMatrix(self.row_ptr, self.col_idx, self.weight_values, (self.out_features, self.in_features),
                         validate=False)

    @property
    def density(self):
        return self.weight.density

    def forward(self, x):
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features)
        xt = x2.t()
        if not xt.is_contiguous():
            xt = xt.contiguous()
        y = sparse_mm(self.weight, xt).t()  # [batch, out] as a view of W·xᵀ
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*lead, self.out_features)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"block_size={self.block_size}, density={self.density:.3f}")


class TopKBlockGate(nn.Module):
    """Chooses a block-sparse attention layout from Q and K: for each (batch, head, query block) the
    k_blocks key blocks with the largest score

        s(i, j) = (mean of query block i's rows of Q) · W_q  ·  (mean of key block j's rows of K) · W_k

    with learnable projections W_q, W_k (head_dim x proj_dim; initialised to the identity when proj_dim ==
    head_dim, so an untrained gate scores plain pooled dot products). forward(q, k) returns an
    bsk.AttnLayout for bsk.block_sparse_attention, computed by libbsk's gate (bsk.topk_block_layout) on the
    inputs' device.

    The selection itself is not differentiable: no gradient flows from the layout (or from the attention
    output through it) to q, k, W_q or W_k. To learn the projections, train them with an auxiliary loss on
    block_scores(q, k) (the same scores computed with differentiable torch ops), e.g. against the attention
    mass each key block gets in dense attention.

    keep_first / keep_diagonal force key block 0 / the diagonal block (they count toward k_blocks); causal
    (with causal_offset) restricts the candidates and makes block_sparse_attention apply the causal mask.
    """

    def __init__(self, head_dim, block_size, k_blocks, proj_dim=None, *, keep_first=True, keep_diagonal=True,
                 causal=False, causal_offset=0, layout_order="bshd", device=None, dtype=None):
        super().__init__()
        self.head_dim = int(head_dim)
        self.proj_dim = self.head_dim if proj_dim is None else int(proj_dim)
        self.block_size = _pair(block_size)
        self.k_blocks = int(k_blocks)
        self.keep_first, self.keep_diagonal = bool(keep_first), bool(keep_diagonal)
        self.causal, self.causal_offset = bool(causal), int(causal_offset)
        _order(layout_order)
        self.layout_order = layout_order
        self.proj_q = nn.Parameter(torch.empty(self.head_dim, self.proj_dim, device=device, dtype=dtype))
        self.proj_k = nn.Parameter(torch.empty(self.head_dim, self.proj_dim, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        with torch.no_grad():
            if self.proj_dim == self.head_dim:
                nn.init.eye_(self.proj_q)
                nn.init.eye_(self.proj_k)
            else:  # a random projection that keeps dot products' scale on average
                nn.init.normal_(self.proj_q, std=1.0 / math.sqrt(self.proj_dim))
                nn.init.normal_(self.proj_k, std=1.0 / math.sqrt(self.proj_dim))

    def forward(self, q, k, kv_lens=None):
        """The layout (bsk.AttnLayout, q's batch and heads) for q, k in this gate's layout_order."""
        return topk_block_layout(q, k, self.block_size, self.k_blocks, self.keep_first, self.keep_diagonal, self.causal,
                                 self.proj_q, self.proj_k, causal_offset=self.causal_offset, kv_lens=kv_lens,
                                 layout_order=self.layout_order)

    def block_scores(self, q, k, kv_lens=None):
        """The scores the gate ranks, [batch, heads, mq, nb] (-inf for non-candidates), differentiable w.r.t.
        q, k and the projections (torch ops, fp32)."""
        return block_scores(q, k, self.block_size, self.proj_q, self.proj_k, kv_lens=kv_lens, causal=self.causal,
                            causal_offset=self.causal_offset, layout_order=self.layout_order)

    def extra_repr(self):
        return (f"head_dim={self.head_dim}, proj_dim={self.proj_dim}, block_size={self.block_size}, "
                f"k_blocks={self.k_blocks}, causal={self.causal}, layout_order={self.layout_order!r}")


__all__ = ["BSRLinear", "TopKBlockGate"]
