"""Zero-size tensors: torch gives a dimension after a size-0 one the stride it would have with size 1, so
such tensors are not 'compact' by stride arithmetic, yet hold nothing to read or write. They must be taken."""
import torch

import blackwellsparsek as bsk


def test_attention_empty_key_sequence():
    q, k = torch.randn(2, 16, 2, 8), torch.randn(2, 0, 2, 8)
    layout = bsk.AttnLayout.dense(16, 0, 8)      # capacity 0: full_idx [1, 1, 2, 0], strides (2, 2, 1, 1)
    layout.validate()
    o, lse = bsk.block_sparse_attention(q, k, k.clone(), layout, return_lse=True)
    assert torch.equal(o, torch.zeros_like(q))    # rows with nothing to attend to: O = 0, LSE = -inf
    assert bool(torch.isneginf(lse).all())


def test_attention_empty_query_sequence():
    k = torch.randn(2, 16, 2, 8)
    o = bsk.block_sparse_attention(torch.randn(2, 0, 2, 8), k, k.clone(), bsk.AttnLayout.dense(0, 16, 8))
    assert o.shape == (2, 0, 2, 8)                # lse [2, 2, 0] has strides (2, 1, 1)


def test_from_mask_and_gate_with_no_key_blocks():
    layout = bsk.AttnLayout.from_mask(torch.ones(2, 0, dtype=torch.bool), 16, 0, 8)
    assert layout.capacity == 0 and layout.tiles() == (0, 0)
    gate = bsk.topk_block_layout(torch.randn(2, 16, 2, 8), torch.randn(2, 0, 2, 8), 8, 2)
    assert gate.capacity == 0 and gate.tiles() == (0, 0)
