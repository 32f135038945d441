"""Block-sparse attention and the top-k block gate against float64 references.

The reference is plain masked attention in float64: the layout's kept tiles expanded to elements (read
from its lists with Python loops, independently of the package), the key length and the causal rule; the
gate's reference ranks the pooled scores by brute force following bsk.h's rules. CPU runs everywhere (fp32,
fp16, bf16: the CPU backend takes all three); the CUDA tests skip without a GPU.
"""
import gc
import math

import pytest
import torch

import blackwellsparsek as bsk
from conftest import DEVICES, UNIT, needs_cuda, nonzero_uniform

SENTINEL = 7.25
ORDERS = ["bshd", "bhsd"]


# ---------------------------------------------------------------- inputs and references

def make_qkv(B, Sq, Sk, H, HK, D, dtype, order, device, seed=0):
    """q, k, v in `order` (contiguous) and their float64 [B, S, H, D] copies (of the dtype-rounded values)."""
    g = torch.Generator().manual_seed(seed)
    q = nonzero_uniform((B, Sq, H, D), dtype, "cpu", g)
    k = nonzero_uniform((B, Sk, HK, D), dtype, "cpu", g)
    v = nonzero_uniform((B, Sk, HK, D), dtype, "cpu", g)
    ref = tuple(t.double() for t in (q, k, v))
    if order == "bhsd":
        q, k, v = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    return q.to(device), k.to(device), v.to(device), ref


def to_bshd(t, order):
    return t if order == "bshd" else t.transpose(1, 2)


def tile_mask_from_lists(layout):
    """Bool [batch, heads, mq, nb] read from the four arrays with loops (independent of AttnLayout.to_mask)."""
    fc, fi, pc, pi = (t.cpu() for t in (layout.full_count, layout.full_idx, layout.part_count, layout.part_idx))
    Lb, Lh, mq = fc.shape
    m = torch.zeros((Lb, Lh, mq, layout.nb), dtype=torch.bool)
    for b in range(Lb):
        for h in range(Lh):
            for i in range(mq):
                for j in fi[b, h, i, : int(fc[b, h, i])].tolist():
                    m[b, h, i, j] = True
                for j in pi[b, h, i, : int(pc[b, h, i])].tolist():
                    m[b, h, i, j] = True
    return m


def element_mask(tiles, B, H, Sq, Sk, bq, bk, causal=False, offset=0, kv_lens=None):
    """[B, H, Sq, Sk] bool: tile kept, key < kv_len(b), and (causal) k <= q + offset."""
    m = tiles.expand(B, H, -1, -1).repeat_interleave(bq, 2)[:, :, :Sq].repeat_interleave(bk, 3)[..., :Sk]
    kpos = torch.arange(Sk)
    lens = torch.full((B,), Sk) if kv_lens is None else kv_lens.cpu().long()
    m = m & (kpos[None, :] < lens[:, None])[:, None, None, :]
    if causal:
        m = m & (kpos[None, :] <= torch.arange(Sq)[:, None] + offset)[None, None]
    return m


def ref_attention(ref, mask, scale=None):
    """float64 (O [B, Sq, H, D], LSE [B, H, Sq]) of masked attention; empty rows: O = 0, LSE = -inf."""
    q, k, v = ref
    H, HK, D = q.shape[2], k.shape[2], q.shape[3]
    k = k.repeat_interleave(H // HK, dim=2)
    v = v.repeat_interleave(H // HK, dim=2)
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * scale
    s = s.masked_fill(~mask, float("-inf"))
    lse = torch.logsumexp(s, -1)
    p = torch.exp(s - lse[..., None])
    p = torch.where(mask, p, torch.zeros_like(p))
    return torch.einsum("bhqk,bkhd->bqhd", p, v), lse


def check_attention(o, lse, ref_o, ref_lse, dtype, order, gpu=False):
    """Every element: fp32 accumulation error plus one rounding of the output dtype (and, on tensor cores,
    P rounded to the input dtype before P·V: at most one unit of it, since |v| < 1)."""
    o64 = to_bshd(o.detach().cpu().double(), order)
    assert o64.shape == ref_o.shape
    assert torch.isfinite(o64).all(), "non-finite output (an element was not written?)"
    bound = 2 * UNIT[dtype] * ref_o.abs() + 3e-5 + (3 * UNIT[dtype] if gpu else 0.0)
    err = (o64 - ref_o).abs()
    worst = int(torch.argmax(err - bound))
    assert (err <= bound).all(), (f"O: max excess at flat index {worst}: got {o64.flatten()[worst]}, want "
                                  f"{ref_o.flatten()[worst]} ± {bound.flatten()[worst]}")
    if lse is None:
        return
    lse64 = lse.detach().cpu().double()
    assert lse.dtype == torch.float32 and lse64.shape == ref_lse.shape
    empty = torch.isinf(ref_lse)
    assert torch.equal(torch.isinf(lse64) & (lse64 < 0), empty), "LSE -inf exactly on the empty rows"
    ok = ~empty
    lerr = (lse64[ok] - ref_lse[ok]).abs()
    assert (lerr <= 5e-5 * (1 + ref_lse[ok].abs())).all(), f"LSE max error {float(lerr.max()) if lerr.numel() else 0}"


def run_and_check(q, k, v, ref, layout, order, dtype, causal=None, offset=None, kv_lens=None, scale=None, gpu=False):
    B, Sq, H, _ = ref[0].shape
    Sk = ref[1].shape[1]
    o, lse = bsk.block_sparse_attention(q, k, v, layout, causal=causal, scale=scale, layout_order=order,
                                        return_lse=True, causal_offset=offset, kv_lens=kv_lens)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (B, H, Sq)
    eff_causal = layout.is_causal if causal is None else causal
    eff_off = layout.causal_offset if offset is None else offset
    tiles = tile_mask_from_lists(layout)
    mask = element_mask(tiles, B, H, Sq, Sk, layout.block_q, layout.block_k, eff_causal, eff_off, kv_lens)
    ref_o, ref_lse = ref_attention(ref, mask, scale)
    check_attention(o, lse, ref_o, ref_lse, dtype, order, gpu)
    return o, lse, mask


# ---------------------------------------------------------------- layouts

def build(name, Sq, Sk, block, device="cpu", B=2, H=4):
    bq, bk = block
    mq, nb = -(-Sq // bq), -(-Sk // bk)
    if name == "dense":
        return bsk.AttnLayout.dense(Sq, Sk, block, device=device)
    if name == "causal":
        return bsk.AttnLayout.causal(Sq, Sk, block, device=device)
    if name == "causal_bottom_right":
        return bsk.AttnLayout.causal(Sq, Sk, block, causal_offset=Sk - Sq, device=device)
    if name == "local":
        return bsk.AttnLayout.local(Sq, Sk, block, window_left=1, window_right=1, device=device)
    if name == "local_global_causal":
        return bsk.AttnLayout.local(Sq, Sk, block, window_left=1, global_blocks=1, causal=True, device=device)
    if name == "from_mask":
        g = torch.Generator().manual_seed(7)
        mask = torch.rand((B, H, mq, nb), generator=g) < 0.5
        return bsk.AttnLayout.from_mask(mask, Sq, Sk, block, device=device)
    raise ValueError(name)


BUILDERS = ["dense", "causal", "causal_bottom_right", "local", "local_global_causal", "from_mask"]


def expected_tiles(name, Sq, Sk, block):
    """The builder's tile choice from its definition in bsk.h (for the shared builders)."""
    bq, bk = block
    mq, nb = -(-Sq // bq), -(-Sk // bk)
    m = torch.zeros((mq, nb), dtype=torch.bool)
    for i in range(mq):
        q1 = min(Sq, (i + 1) * bq)
        for j in range(nb):
            k0 = j * bk
            if name == "dense":
                keep = True
            elif name in ("causal", "causal_bottom_right"):
                off = 0 if name == "causal" else Sk - Sq
                keep = k0 <= q1 - 1 + off
            elif name == "local":
                d = (i * bq) // bk
                keep = d - 1 <= j <= d + 1
            elif name == "local_global_causal":
                d = (i * bq) // bk
                keep = (j < 1 or i < 1 or d - 1 <= j <= d) and k0 <= q1 - 1
            m[i, j] = keep
    return m


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", BUILDERS)
def test_builders_against_reference(name, dtype, order):
    """Every builder, GQA (4 query heads on 2 KV heads), odd lengths, both orders, every dtype."""
    Sq, Sk, block = 37, 53, (16, 16)
    layout = build(name, Sq, Sk, block)
    layout.validate()
    if name != "from_mask":
        assert torch.equal(tile_mask_from_lists(layout)[0, 0], expected_tiles(name, Sq, Sk, block))
    assert torch.equal(layout.to_mask(), tile_mask_from_lists(layout))
    q, k, v, ref = make_qkv(2, Sq, Sk, 4, 2, 16, dtype, order, "cpu")
    run_and_check(q, k, v, ref, layout, order, dtype)
    assert bsk.last_kernel() == "cpu-attention"


@pytest.mark.parametrize("block", [(8, 16), (16, 8), (1, 5), (64, 64)], ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_block_shapes_and_causal_flag(block, causal):
    """Unequal and tiny block sizes; the causal element mask forced on a dense layout (the diagonal tiles
    are then masked inside, the ones above it contribute nothing)."""
    Sq, Sk = 29, 41
    layout = bsk.AttnLayout.dense(Sq, Sk, block)
    q, k, v, ref = make_qkv(1, Sq, Sk, 2, 2, 8, torch.float32, "bshd", "cpu", seed=3)
    run_and_check(q, k, v, ref, layout, "bshd", torch.float32, causal=causal, offset=3 if causal else None)


@pytest.mark.parametrize("kv_heads", [4, 2, 1], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("order", ORDERS)
def test_head_grouping(kv_heads, order):
    q, k, v, ref = make_qkv(2, 40, 40, 4, kv_heads, 32, torch.bfloat16, order, "cpu", seed=4)
    run_and_check(q, k, v, ref, bsk.AttnLayout.causal(40, 40, 16), order, torch.bfloat16)


def test_per_batch_and_per_head_layouts():
    B, H, Sq, Sk, block = 2, 3, 33, 47, (8, 16)
    mq, nb = 5, 3
    g = torch.Generator().manual_seed(11)
    q, k, v, ref = make_qkv(B, Sq, Sk, H, 1, 8, torch.float32, "bshd", "cpu", seed=5)
    for mask, kw in ((torch.rand((B, H, mq, nb), generator=g) < 0.5, {}),          # per (batch, head)
                     (torch.rand((H, mq, nb), generator=g) < 0.5, {}),             # per head, shared by the batch
                     (torch.rand((B * H, mq, nb), generator=g) < 0.5, {"batch": B}),
                     (torch.rand((mq, nb), generator=g) < 0.5, {})):
        layout = bsk.AttnLayout.from_mask(mask, Sq, Sk, block, **kw)
        want = mask.reshape(-1, mq, nb)
        assert torch.equal(tile_mask_from_lists(layout).reshape(-1, mq, nb), want)
        run_and_check(q, k, v, ref, layout, "bshd", torch.float32)


def test_empty_rows_and_kv_lens():
    """Rows with nothing to attend to (an empty tile row, kv_len 0, causal rows before every key) give O = 0
    and LSE = -inf; kv_lens mask the keys past them."""
    B, H, Sq, Sk, block = 3, 2, 40, 36, (8, 8)
    mq, nb = 5, 5
    mask = torch.ones((1, H, mq, nb), dtype=torch.bool)
    mask[0, 1, 2] = False  # head 1, query block 2: no tiles at all
    layout = bsk.AttnLayout.from_mask(mask, Sq, Sk, block)
    kv_lens = torch.tensor([0, 13, 36], dtype=torch.int32)
    q, k, v, ref = make_qkv(B, Sq, Sk, H, H, 16, torch.float32, "bhsd", "cpu", seed=6)
    o, lse, m = run_and_check(q, k, v, ref, layout, "bhsd", torch.float32, kv_lens=kv_lens)
    assert (o[0] == 0).all() and torch.isneginf(lse[0]).all()
    assert (o[:, 1, 16:24] == 0).all() and torch.isneginf(lse[:, 1, 16:24]).all()
    # causal with a negative offset: the first rows see no key
    o, lse, _ = run_and_check(q, k, v, ref, layout, "bhsd", torch.float32, causal=True, offset=-5, kv_lens=kv_lens)
    assert torch.isneginf(lse[:, :, :5]).all() and (o[:, :, :5] == 0).all()


def test_strided_views_and_out():
    """q, k, v as slices of one packed [B, S, 3, H, D] tensor (bshd) and as transposed views (bhsd), k and v
    broadcast over the batch with stride 0; out= a slice of a larger buffer (the rest untouched)."""
    B, S, H, D = 2, 45, 4, 16
    g = torch.Generator().manual_seed(8)
    qkv = nonzero_uniform((B, S, 3, H, D), torch.float16, "cpu", g)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    ref = tuple(t.double() for t in (q, k, v))
    layout = bsk.AttnLayout.causal(S, S, 16)
    run_and_check(q, k, v, ref, layout, "bshd", torch.float16)
    # bhsd views of bshd storage
    run_and_check(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), ref, layout, "bhsd", torch.float16)
    # stride-0 batch broadcast of k, v
    kb, vb = k[:1].expand(B, -1, -1, -1), v[:1].expand(B, -1, -1, -1)
    assert kb.stride(0) == 0
    run_and_check(q, kb, vb, (ref[0], ref[1][:1].expand(B, -1, -1, -1), ref[2][:1].expand(B, -1, -1, -1)), layout,
                  "bshd", torch.float16)
    # out= into a strided slice
    buf = torch.full((B, S, H, D + 8), SENTINEL, dtype=torch.float16)
    out = buf[..., 4:4 + D]
    r = bsk.block_sparse_attention(q, k, v, layout, out=out)
    assert r is out
    mask = element_mask(tile_mask_from_lists(layout), B, H, S, S, 16, 16, True, 0)
    ref_o, _ = ref_attention(ref, mask)
    check_attention(out, None, ref_o, None, torch.float16, "bshd")
    assert (buf[..., :4] == SENTINEL).all() and (buf[..., 4 + D:] == SENTINEL).all()
    r, lse = bsk.block_sparse_attention(q, k, v, layout, out=out, return_lse=True)
    assert r is out and lse.shape == (B, H, S)


def test_scale():
    q, k, v, ref = make_qkv(1, 20, 30, 2, 2, 8, torch.float32, "bshd", "cpu", seed=9)
    run_and_check(q, k, v, ref, bsk.AttnLayout.dense(20, 30, 8), "bshd", torch.float32, scale=1.7)


def test_layout_memory_outlives_the_handle():
    """The builders' arrays (libbsk memory viewed without a copy) live as long as any tensor viewing them."""
    layout = bsk.AttnLayout.causal(100, 100, 10)
    fc, pi = layout.full_count, layout.part_idx
    want = tile_mask_from_lists(layout)
    del layout
    gc.collect()
    assert fc.tolist()[0][0] == list(range(10)) and pi.shape == (1, 1, 10, 10)
    again = bsk.AttnLayout(fc, torch.zeros_like(pi), torch.zeros_like(fc), pi, 100, 100, 10, validate=False)
    assert again.mq == 10 and tile_mask_from_lists(again).shape == want.shape


def test_dlpack_layer_with_numpy_and_library_layouts():
    """The extension alone (no torch in the call): NumPy arrays, a libbsk-owned layout object as the layout, and
    the gate writing into a layout from bsk_attn_layout_alloc."""
    np = pytest.importorskip("numpy")
    from blackwellsparsek import _bsk

    q, k, v, ref = make_qkv(1, 24, 40, 2, 1, 8, torch.float32, "bshd", "cpu", seed=26)
    qn, kn, vn = (t.numpy() for t in (q, k, v))
    on = np.full(qn.shape, np.nan, dtype=np.float32)
    lse = np.full((1, 2, 24), np.nan, dtype=np.float32)
    handle = _bsk.attn_layout_causal(24, 40, 8, 8, 16)
    assert (handle.mq, handle.nb, handle.capacity, handle.device) == (3, 5, 5, -1)
    _bsk.attention_forward(bsk._dlpack.context(-1), qn, kn, vn, on, handle, lse=lse, causal=True, causal_offset=16)
    layout = bsk.AttnLayout(*(torch.from_dlpack(handle.export(i)) for i in range(4)), 24, 40, 8, validate=True)
    mask = element_mask(tile_mask_from_lists(layout), 1, 2, 24, 40, 8, 8, True, 16)
    ref_o, ref_lse = ref_attention(ref, mask)
    check_attention(torch.from_numpy(on), torch.from_numpy(lse), ref_o, ref_lse, torch.float32, "bshd")
    out = _bsk.attn_layout_alloc(24, 40, 8, 8, 1, 2, 2)
    _bsk.topk_block_layout(bsk._dlpack.context(-1), qn, kn, out, 2, keep_first=False, keep_diagonal=False)
    gate = bsk.topk_block_layout(q, k, 8, 2, keep_first=False, keep_diagonal=False)
    assert out.tiles() == gate.tiles()
    assert torch.equal(torch.from_dlpack(out.export(0)), gate.full_count)
    assert torch.equal(torch.from_dlpack(out.export(2)), gate.part_count)


def test_layout_facts():
    layout = bsk.AttnLayout.causal(64, 64, 16)
    assert (layout.batch, layout.heads, layout.mq, layout.nb, layout.capacity) == (1, 1, 4, 4, 4)
    assert layout.tiles() == (6, 4) and abs(layout.density - 10 / 16) < 1e-12
    assert layout.is_causal and layout.to("cpu") is layout and "AttnLayout" in repr(layout)


# ---------------------------------------------------------------- top-k gate

def bruteforce_gate(q, k, block, top_k, keep_first, keep_diagonal, causal, offset, kv_lens, proj):
    """Sets of kept key blocks per (b, h, i) following bsk.h, scores in float64 from float64 means."""
    q, k = q.double(), k.double()  # [B, S, H, D]
    B, Sq, H, D = q.shape
    Sk, HK = k.shape[1], k.shape[2]
    bq, bk = block
    mq, nb = -(-Sq // bq), -(-Sk // bk)
    sets = {}
    for b in range(B):
        kv_len = Sk if kv_lens is None else int(kv_lens[b])
        for h in range(H):
            hk = h // (H // HK)
            for i in range(mq):
                q0, q1 = i * bq, min(Sq, (i + 1) * bq)
                qm = q[b, q0:q1, h].mean(0)
                if proj is not None:
                    qm = qm @ proj[0].double()
                cand, score = [], {}
                for j in range(nb):
                    if not (j * bk < kv_len and (not causal or j * bk <= q1 - 1 + offset)):
                        continue
                    k1 = min(kv_len, (j + 1) * bk)
                    km = k[b, j * bk:k1, hk].mean(0)
                    if proj is not None:
                        km = km @ proj[1].double()
                    cand.append(j)
                    score[j] = float(qm @ km)
                forced = set()
                if keep_first and 0 in cand:
                    forced.add(0)
                key = min(q1 - 1 + offset, kv_len - 1)
                if keep_diagonal and key >= 0 and key // bk in cand:
                    forced.add(key // bk)
                rest = sorted((j for j in cand if j not in forced), key=lambda j: (-score[j], j))
                sets[(b, h, i)] = forced | set(rest[: max(0, top_k - len(forced))])
    return sets


GATE_CASES = {
    "plain": dict(top_k=2, keep_first=False, keep_diagonal=False, causal=False, offset=0, kv=False, proj=False),
    "keep_both": dict(top_k=3, keep_first=True, keep_diagonal=True, causal=False, offset=0, kv=False, proj=False),
    "causal": dict(top_k=2, keep_first=True, keep_diagonal=True, causal=True, offset=0, kv=False, proj=False),
    "causal_kvlens_proj": dict(top_k=3, keep_first=True, keep_diagonal=True, causal=True, offset=6, kv=True,
                               proj=True),
    "topk_over_nb": dict(top_k=50, keep_first=False, keep_diagonal=True, causal=False, offset=0, kv=True, proj=False),
}


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("case", list(GATE_CASES))
def test_gate_against_bruteforce(case, order):
    c = GATE_CASES[case]
    B, Sq, Sk, H, HK, D, block = 2, 45, 70, 4, 2, 16, (8, 10)
    q, k, v, ref = make_qkv(B, Sq, Sk, H, HK, D, torch.float32, order, "cpu", seed=12)
    kv_lens = torch.tensor([70, 33], dtype=torch.int32) if c["kv"] else None
    g = torch.Generator().manual_seed(13)
    proj = (torch.randn(D, 5, generator=g), torch.randn(D, 5, generator=g)) if c["proj"] else None
    layout = bsk.topk_block_layout(q, k, block, c["top_k"], c["keep_first"], c["keep_diagonal"], c["causal"],
                                   *(proj or (None, None)), causal_offset=c["offset"], kv_lens=kv_lens,
                                   layout_order=order)
    assert (layout.batch, layout.heads, layout.capacity) == (B, H, min(c["top_k"], 7))
    assert layout.is_causal == c["causal"] and layout.causal_offset == c["offset"]
    layout.validate()
    want = bruteforce_gate(ref[0].float(), ref[1].float(), block, c["top_k"], c["keep_first"], c["keep_diagonal"],
                           c["causal"], c["offset"], kv_lens, proj)
    got = tile_mask_from_lists(layout)
    for (b, h, i), s in want.items():
        assert set(torch.nonzero(got[b, h, i]).flatten().tolist()) == s, (b, h, i)
    # full tiles are exactly the kept tiles with no masked element (key length, causal diagonal)
    fc, fi = layout.full_count, layout.full_idx
    for b in range(B):
        kv_len = Sk if kv_lens is None else int(kv_lens[b])
        for h in range(H):
            for i in range(layout.mq):
                full = set(fi[b, h, i, : int(fc[b, h, i])].tolist())
                for j in torch.nonzero(got[b, h, i]).flatten().tolist():
                    visible = (j + 1) * 10 <= kv_len and (not c["causal"] or (j + 1) * 10 - 1 <= i * 8 + c["offset"])
                    assert (j in full) == visible, (b, h, i, j)
    # and the layout feeds attention (its causal setting applied by default)
    run_and_check(q, k, v, ref, layout, order, torch.float32, kv_lens=kv_lens)


def test_gate_module_and_scores():
    B, S, H, D = 2, 64, 2, 16
    q, k, v, ref = make_qkv(B, S, S, H, H, D, torch.float32, "bshd", "cpu", seed=14)
    gate = bsk.nn.TopKBlockGate(D, 16, 2, proj_dim=8, keep_first=False, keep_diagonal=False, causal=True)
    assert gate.proj_q.shape == (D, 8) and gate.proj_q.requires_grad
    layout = gate(q, k)
    same = bsk.topk_block_layout(q, k, 16, 2, False, False, True, gate.proj_q, gate.proj_k)
    assert torch.equal(tile_mask_from_lists(layout), tile_mask_from_lists(same))
    # block_scores ranks the same way (random data: no near-ties) and is differentiable
    scores = gate.block_scores(q, k)
    assert scores.shape == (B, H, 4, 4)
    mask = tile_mask_from_lists(layout)
    for b in range(B):
        for h in range(H):
            for i in range(4):
                finite = torch.isfinite(scores[b, h, i])
                n = min(2, int(finite.sum()))
                top = set(torch.topk(scores[b, h, i].detach(), n).indices.tolist())
                assert set(torch.nonzero(mask[b, h, i]).flatten().tolist()) == top
    torch.where(torch.isfinite(scores), scores, 0).sum().backward()
    assert gate.proj_q.grad is not None and gate.proj_q.grad.abs().sum() > 0
    # an identity-initialised gate equals the plain gate
    plain = bsk.nn.TopKBlockGate(D, 16, 3)
    assert torch.equal(plain.proj_q.detach(), torch.eye(D))
    assert torch.equal(tile_mask_from_lists(plain(q, k)), tile_mask_from_lists(bsk.topk_block_layout(q, k, 16, 3)))
    out = bsk.block_sparse_attention(q, k, v, layout)
    assert out.shape == q.shape


# ---------------------------------------------------------------- FlexAttention BlockMask

def _flex():
    try:
        from torch.nn.attention.flex_attention import create_block_mask
    except ImportError:
        pytest.skip("torch.nn.attention.flex_attention is not available")
    return create_block_mask


@pytest.mark.parametrize("device", DEVICES)
def test_block_mask_causal(device):
    create_block_mask = _flex()
    Sq, Sk, B, H = 37, 53, 2, 4
    bm = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= kv_idx, None, None, Sq, Sk, device=device,
                           BLOCK_SIZE=16)
    q, k, v, ref = make_qkv(B, Sq, Sk, H, 2, 16, torch.float32, "bshd", device, seed=15)
    o, lse = bsk.block_sparse_attention(q, k, v, bm, causal=True, return_lse=True)
    layout = bsk.AttnLayout.from_block_mask(bm)
    assert layout.block_size == (16, 16) and (layout.seq_q, layout.seq_k) == (Sq, Sk)
    tiles = tile_mask_from_lists(layout)
    mask = element_mask(tiles, B, H, Sq, Sk, 16, 16, True, 0)
    # the layout's elements are exactly the BlockMask's causal elements
    assert torch.equal(mask, element_mask(torch.ones_like(tiles), B, H, Sq, Sk, 16, 16, True, 0))
    ref_o, ref_lse = ref_attention(ref, mask)
    check_attention(o, lse, ref_o, ref_lse, torch.float32, "bshd", gpu=device == "cuda")
    # and FlexAttention itself (eager, unfused) agrees
    import warnings

    from torch.nn.attention.flex_attention import flex_attention
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "flex_attention called without torch.compile()"
        try:
            fo = flex_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), block_mask=bm,
                                enable_gqa=True).transpose(1, 2)
        except TypeError:  # a torch without enable_gqa
            return
    torch.testing.assert_close(o, fo, rtol=1e-5, atol=2e-5 if device == "cpu" else 1e-4)


def test_block_mask_dense_and_refused_mask_mod():
    create_block_mask = _flex()
    Sq, Sk = 37, 53
    q, k, v, ref = make_qkv(1, Sq, Sk, 2, 2, 8, torch.float32, "bshd", "cpu", seed=16)
    # noop mask_mod: partial tiles only where a block crosses the sequence ends, which our mask reproduces
    bm = create_block_mask(lambda b, h, q_idx, kv_idx: q_idx >= 0, None, None, Sq, Sk, device="cpu", BLOCK_SIZE=16)
    o = bsk.block_sparse_attention(q, k, v, bm)
    ref_o, _ = ref_attention(ref, torch.ones((1, 2, Sq, Sk), dtype=torch.bool))
    check_attention(o, None, ref_o, None, torch.float32, "bshd")
    # a block-sparse BlockMask whose tiles are all full (block-aligned mask_mod): honoured as is
    bm = create_block_mask(lambda b, h, q_idx, kv_idx: (q_idx // 16 + kv_idx // 16) % 2 == 0, None, None, 48, 64,
                           device="cpu", BLOCK_SIZE=16)
    q2, k2, v2, ref2 = make_qkv(1, 48, 64, 2, 2, 8, torch.float32, "bshd", "cpu", seed=17)
    o = bsk.block_sparse_attention(q2, k2, v2, bm)
    qi, ki = torch.arange(48)[:, None], torch.arange(64)[None, :]
    ref_o, _ = ref_attention(ref2, ((qi // 16 + ki // 16) % 2 == 0).expand(1, 2, 48, 64))
    check_attention(o, None, ref_o, None, torch.float32, "bshd")
    # the same block-aligned mask with odd lengths: its boundary tiles are partial, mask_mod allows them whole
    q3, k3, v3, ref3 = make_qkv(1, 45, 59, 2, 2, 8, torch.float32, "bshd", "cpu", seed=27)
    bm = create_block_mask(lambda b, h, q_idx, kv_idx: (q_idx // 16 + kv_idx // 16) % 2 == 0, None, None, 45, 59,
                           device="cpu", BLOCK_SIZE=16)
    o = bsk.block_sparse_attention(q3, k3, v3, bm)
    qi, ki = torch.arange(45)[:, None], torch.arange(59)[None, :]
    ref_o, _ = ref_attention(ref3, ((qi // 16 + ki // 16) % 2 == 0).expand(1, 2, 45, 59))
    check_attention(o, None, ref_o, None, torch.float32, "bshd")
    # mask_mods bsk cannot apply inside partial tiles -> refused, not silently wrong: a sliding window (interior
    # partial tiles), and a key cut that only touches the last key block (a boundary tile not allowed whole)
    out = torch.full_like(q2, SENTINEL)
    for mod, sk in ((lambda b, h, q_idx, kv_idx: (q_idx - kv_idx).abs() <= 4, 64),
                    (lambda b, h, q_idx, kv_idx: kv_idx < 50, 53)):
        bm = create_block_mask(mod, None, None, 48, sk, device="cpu", BLOCK_SIZE=16)
        _, kk, vv, _ = make_qkv(1, 48, sk, 2, 2, 8, torch.float32, "bshd", "cpu", seed=28)
        with pytest.raises(bsk.BSKError, match="mask_mod") as info:
            bsk.block_sparse_attention(q2, kk, vv, bm, out=out)
        assert info.value.status == "BSK_ERR_INVALID_ARGUMENT" and (out == SENTINEL).all()


# ---------------------------------------------------------------- autograd, compile

# (autograd through the attention: test_attention_backward.py)


@pytest.mark.parametrize("device", DEVICES)
def test_compile_attention_and_gate(device):
    torch._dynamo.reset()
    layout = bsk.AttnLayout.causal(40, 40, 8, device=device)

    def f(q, k, v):
        o, lse = bsk.block_sparse_attention(q, k, v, layout, return_lse=True)
        return torch.relu(o) * 2, lse.exp()

    def g(q, k, v):
        return bsk.block_sparse_attention(q, k, v, bsk.topk_block_layout(q, k, 8, 3, causal=True))

    q, k, v, _ = make_qkv(2, 40, 40, 2, 1, 16, torch.float32, "bshd", device, seed=18)
    for fn in (f, g):
        want = fn(q, k, v)
        got = torch.compile(fn, backend="aot_eager", fullgraph=True)(q, k, v)
        for w, c in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
            torch.testing.assert_close(c, w, rtol=0, atol=0)


def test_fake_kernels():
    from torch._subclasses.fake_tensor import FakeTensorMode

    layout = bsk.AttnLayout.dense(30, 20, 8)
    with FakeTensorMode() as mode:
        arrays = [mode.from_tensor(t) for t in (layout.full_count, layout.full_idx, layout.part_count, layout.part_idx)]
        q, k = torch.empty(2, 4, 30, 16), torch.empty(2, 2, 20, 16)
        o, lse = torch.ops.bsk.block_sparse_attention(q, k, k, *arrays, None, 30, 20, 8, 8, 0.0, False, 0, True)
        assert o.shape == q.shape and lse.shape == (2, 4, 30) and lse.dtype == torch.float32
        fc, fi, pc, pi = torch.ops.bsk.topk_block_layout(q, k, None, None, None, 8, 8, 2, False, 0, True, True, True)
        assert fc.shape == (2, 4, 4) and fi.shape == (2, 4, 4, 2) and fi.dtype == torch.int32


# ---------------------------------------------------------------- bad input

def _raises(status, fn, match=None):
    with pytest.raises(bsk.BSKError, match=match) as info:
        fn()
    assert info.value.status == status, str(info.value)
    return info.value


@pytest.mark.parametrize("device", DEVICES)
def test_bad_inputs_leave_out_untouched(device):
    B, S, H, D = 2, 32, 4, 16
    q, k, v, _ = make_qkv(B, S, S, H, 2, D, torch.float16, "bshd", device, seed=19)
    layout = bsk.AttnLayout.causal(S, S, 16, device=device)
    out = torch.full_like(q, SENTINEL)
    att = bsk.block_sparse_attention
    _raises("BSK_ERR_UNSUPPORTED", lambda: att(q, k.float(), v, layout, out=out), "same dtype")
    _raises("BSK_ERR_UNSUPPORTED", lambda: att(q.double(), k.double(), v.double(), layout, out=out.double()), "float64")
    _raises("BSK_ERR_UNSUPPORTED", lambda: att(q, k, v, layout, out=out.float()), "one dtype")
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: att(q[0], k, v, layout, out=out), "4-D")
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: att(q, k[:, :20], v[:, :20], layout, out=out), "layout")
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: att(q, k, v[:, :31], layout, out=out), "same shape")
    k3, v3 = k[:, :, :1].expand(-1, -1, 3, -1), v[:, :, :1].expand(-1, -1, 3, -1)
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: att(q, k3, v3, layout, out=out), "multiple")
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: att(q, k, v, bsk.AttnLayout.causal(S, S + 1, 16, device=device), out=out))
    wide = torch.cat([q, q], 3)
    _raises("BSK_ERR_BAD_LAYOUT", lambda: att(wide[..., ::2], k, v, layout, out=out), "inner")
    _raises("BSK_ERR_INVALID_ARGUMENT", lambda: att(q, k, v, layout, out=q), None)  # out aliases q
    _raises("BSK_ERR_INVALID_ARGUMENT", lambda: att(q, k, v, layout, scale=0.0, out=out), "scale")
    _raises("BSK_ERR_INVALID_ARGUMENT", lambda: att(q, k, v, layout, scale=float("inf"), out=out), "finite")
    _raises("BSK_ERR_UNSUPPORTED", lambda: att(q, k, v, layout, kv_lens=torch.tensor([3, 4], device=device), out=out),
            "int32")
    _raises("BSK_ERR_SHAPE_MISMATCH",
            lambda: att(q, k, v, layout, kv_lens=torch.tensor([3], dtype=torch.int32, device=device), out=out))
    big = torch.ones(1, 8, 1, 513, dtype=torch.float16, device=device)
    _raises("BSK_ERR_UNSUPPORTED", lambda: att(big, big, big, bsk.AttnLayout.dense(8, 8, 8, device=device),
                                               out=torch.full_like(big, SENTINEL)))
    if device == "cpu":  # host-checked: kv_lens range, malformed lists
        _raises("BSK_ERR_INVALID_ARGUMENT",
                lambda: att(q, k, v, layout, kv_lens=torch.tensor([3, 33], dtype=torch.int32), out=out))
        fi = layout.full_idx.clone()
        fi[0, 0, 1, :2] = torch.tensor([1, 0], dtype=torch.int32)  # unsorted
        bad = bsk.AttnLayout(layout.full_count, fi, layout.part_count, layout.part_idx, S, S, 16, validate=False)
        _raises("BSK_ERR_INVALID_BSR", lambda: att(q, k, v, bad, out=out))
        _raises("BSK_ERR_INVALID_BSR", lambda: bad.validate())
    assert (out == SENTINEL).all()
    with pytest.raises(TypeError):
        att(q, k, v, "not a layout")
    with pytest.raises(ValueError, match="layout_order"):
        att(q, k, v, layout, layout_order="bsdh")
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        att(q.detach().requires_grad_(), k, v, layout, out=out)
    assert (out == SENTINEL).all()


def test_bad_gate_and_layout_arguments():
    q, k, _, _ = make_qkv(1, 32, 32, 2, 2, 8, torch.float32, "bshd", "cpu")
    _raises("BSK_ERR_INVALID_ARGUMENT", lambda: bsk.topk_block_layout(q, k, 8, 0))
    _raises("BSK_ERR_INVALID_ARGUMENT", lambda: bsk.topk_block_layout(q, k, 8, 1, keep_first=True, keep_diagonal=True))
    _raises("BSK_ERR_NULL_POINTER", lambda: bsk.topk_block_layout(q, k, 8, 2, proj_q=torch.eye(8)))
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: bsk.topk_block_layout(q, k, 8, 2, proj_q=torch.eye(8),
                                                                    proj_k=torch.eye(7)))
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: bsk.AttnLayout.from_mask(torch.ones(3, 3, dtype=torch.bool), 32, 32, 8))
    _raises("BSK_ERR_INVALID_ARGUMENT", lambda: bsk.AttnLayout.dense(32, 32, 0))
    _raises("BSK_ERR_INVALID_ARGUMENT", lambda: bsk.AttnLayout.local(32, 32, 8, window_left=-1))
    _raises("BSK_ERR_WRONG_LOCATION", lambda: bsk.block_sparse_attention(q, k, k, bsk.AttnLayout.dense(32, 32, 8),
                                                                         out=torch.empty_like(q, device="meta")))


def test_scale_outside_float32_refused():
    """libbsk takes the scale as a float32, 0 meaning 1/sqrt(dim): a non-zero scale that rounds to 0 there must not
    silently become the default scale, nor one past float32's range an infinity (forward and backward)."""
    q, k, v, _ = make_qkv(1, 16, 16, 2, 2, 8, torch.float32, "bshd", "cpu", seed=23)
    layout = bsk.AttnLayout.dense(16, 16, 8)
    out = torch.full_like(q, SENTINEL)
    for scale in (1e-46, -1e-300, 3.5e38, -1e39):
        _raises("BSK_ERR_INVALID_ARGUMENT",
                lambda: bsk.block_sparse_attention(q, k, v, layout, scale=scale, out=out), "scale")
    assert (out == SENTINEL).all()
    o, lse = bsk.block_sparse_attention(q, k, v, layout, return_lse=True)
    lists = (layout.full_count, layout.full_idx, layout.part_count, layout.part_idx)
    for scale in (1e-46, 3.5e38):
        _raises("BSK_ERR_INVALID_ARGUMENT", lambda: bsk.attention._attention_backward_op(
            torch.ones_like(o), q, k, v, o, lse, None, *lists, None, 16, 16, 8, 8, scale, False, 0, False), "scale")
    # a float32 subnormal is still a scale of its own: the scores are ~0, the weights uniform over the 16 keys
    o = bsk.block_sparse_attention(q, k, v, layout, scale=1e-40)
    want = v.double().mean(1, keepdim=True).expand_as(o)
    assert torch.allclose(o.double(), want, atol=1e-6)


def test_from_mask_block_size_out_of_range():
    mask = torch.ones(2, 2, dtype=torch.bool)
    for bs in (0, (8, 0), 2048):
        _raises("BSK_ERR_INVALID_ARGUMENT", lambda: bsk.AttnLayout.from_mask(mask, 16, 16, bs), "block size")


# ---------------------------------------------------------------- CUDA

GPU_CASES = [
    # (dtype, D, block, Sq, Sk, causal, kv_heads, order)
    (torch.float16, 64, (64, 64), 200, 333, True, 2, "bshd"),
    (torch.bfloat16, 128, (128, 64), 257, 257, True, 4, "bhsd"),
    (torch.bfloat16, 64, (64, 128), 190, 300, False, 1, "bshd"),
    (torch.float16, 128, (128, 128), 256, 512, False, 2, "bhsd"),
    (torch.float32, 32, (32, 32), 100, 77, True, 2, "bshd"),   # CUDA-core kernel
    (torch.bfloat16, 48, (64, 64), 130, 150, True, 2, "bshd"),  # dim 48: CUDA-core kernel
]


@needs_cuda
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: f"{str(c[0])[6:]}-d{c[1]}-b{c[2][0]}x{c[2][1]}-{c[7]}")
def test_cuda_against_reference(case):
    dtype, D, block, Sq, Sk, causal, HK, order = case
    B, H = 2, 4
    q, k, v, ref = make_qkv(B, Sq, Sk, H, HK, D, dtype, order, "cuda", seed=20)
    layouts = [bsk.AttnLayout.causal(Sq, Sk, block, causal_offset=Sk - Sq, device="cuda") if causal
               else bsk.AttnLayout.local(Sq, Sk, block, window_left=1, window_right=1, global_blocks=1).cuda()]
    mq, nb = -(-Sq // block[0]), -(-Sk // block[1])
    g = torch.Generator().manual_seed(21)
    layouts.append(bsk.AttnLayout.from_mask(torch.rand((B, H, mq, nb), generator=g) < 0.5, Sq, Sk, block,
                                            causal=causal, device="cuda"))
    kv_lens = torch.tensor([Sk, Sk // 2], dtype=torch.int32, device="cuda")
    for layout in layouts:
        assert layout.device.type == "cuda"
        run_and_check(q, k, v, ref, layout, order, dtype, kv_lens=kv_lens, gpu=True)
        torch.cuda.synchronize()
        name = bsk.last_kernel("cuda")
        assert name in ("hopper-attn-wgmma", "cuda-attention-mma", "cuda-attention-simt"), name
        if dtype != torch.float32 and D in (64, 128):
            # tensor cores: the Hopper kernel on sm_90 for 128 x 128 blocks, else mma.sync
            hopper = torch.cuda.get_device_capability() == (9, 0) and tuple(block) == (128, 128)
            assert name == ("hopper-attn-wgmma" if hopper else "cuda-attention-mma"), name


@needs_cuda
def test_cuda_gate_matches_cpu_gate():
    """bsk.h: the CPU and GPU gates select the same tiles (fixed summation order)."""
    q, k, _, _ = make_qkv(2, 300, 520, 4, 2, 64, torch.bfloat16, "bshd", "cpu", seed=22)
    kv_lens = torch.tensor([520, 311], dtype=torch.int32)
    g = torch.Generator().manual_seed(23)
    pq, pk = torch.randn(64, 16, generator=g), torch.randn(64, 16, generator=g)
    kw = dict(causal=True, causal_offset=220, kv_lens=kv_lens, proj_q=pq, proj_k=pk)
    cpu = bsk.topk_block_layout(q, k, 64, 4, **kw)
    gpu = bsk.topk_block_layout(q.cuda(), k.cuda(), 64, 4, **{n: (t.cuda() if isinstance(t, torch.Tensor) else t)
                                                                 for n, t in kw.items()})
    assert gpu.device.type == "cuda"
    for a, b in zip((cpu.full_count, cpu.part_count), (gpu.full_count, gpu.part_count)):
        assert torch.equal(a, b.cpu())
    assert torch.equal(tile_mask_from_lists(cpu), tile_mask_from_lists(gpu))
    gpu.validate()


@needs_cuda
def test_cuda_layout_clone_and_moves():
    host = bsk.AttnLayout.local(300, 300, 64, window_left=2, global_blocks=1, causal=True)
    dev = host.to("cuda")
    assert dev.full_idx.device.type == "cuda" and dev._handle is not None and dev._handle.device >= 0
    assert torch.equal(tile_mask_from_lists(dev), tile_mask_from_lists(host))
    assert dev.tiles() == host.tiles()
    back = dev.cpu()
    assert torch.equal(back.full_idx, host.full_idx)
    gate = bsk.topk_block_layout(torch.randn(1, 128, 2, 64, device="cuda"), torch.randn(1, 128, 2, 64, device="cuda"),
                                 64, 1, keep_first=False, keep_diagonal=False)
    assert gate.cpu().device.type == "cpu"


@needs_cuda
def test_cuda_graph_capture_attention():
    B, S, H, D = 2, 256, 4, 64
    q, k, v, ref = make_qkv(B, S, S, H, 2, D, torch.bfloat16, "bshd", "cuda", seed=24)
    layout = bsk.AttnLayout.causal(S, S, 64, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            bsk.block_sparse_attention(q, k, v, layout)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o = bsk.block_sparse_attention(q, k, v, layout)
    for seed in range(2):
        q2, k2, v2, ref2 = make_qkv(B, S, S, H, 2, D, torch.bfloat16, "bshd", "cuda", seed=30 + seed)
        q.copy_(q2), k.copy_(k2), v.copy_(v2)
        o.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        mask = element_mask(tile_mask_from_lists(layout), B, H, S, S, 64, 64, True, 0)
        ref_o, _ = ref_attention(ref2, mask)
        check_attention(o, None, ref_o, None, torch.bfloat16, "bshd", gpu=True)


@needs_cuda
def test_cuda_runs_on_current_stream():
    B, S, H, D = 1, 512, 2, 128
    q0, k0, v0, ref = make_qkv(B, S, S, H, H, D, torch.float16, "bshd", "cpu", seed=25)
    layout = bsk.AttnLayout.dense(S, S, 128, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        q, k, v = (torch.empty(t.shape, dtype=t.dtype, device="cuda") for t in (q0, k0, v0))
        for dst, src in ((q, q0), (k, k0), (v, v0)):
            dst.copy_(src.pin_memory(), non_blocking=True)
        o = bsk.block_sparse_attention(q, k, v, layout)
    s.synchronize()
    ref_o, _ = ref_attention(ref, torch.ones((B, H, S, S), dtype=torch.bool))
    check_attention(o, None, ref_o, None, torch.float16, "bshd", gpu=True)


@needs_cuda
def test_cuda_device_mismatch():
    q, k, v, _ = make_qkv(1, 64, 64, 2, 2, 64, torch.float16, "bshd", "cuda")
    out = torch.full_like(q, SENTINEL)
    _raises("BSK_ERR_WRONG_LOCATION", lambda: bsk.block_sparse_attention(q, k, v, bsk.AttnLayout.dense(64, 64, 64),
                                                                         out=out), "different devices")
    _raises("BSK_ERR_WRONG_LOCATION", lambda: bsk.block_sparse_attention(q, k.cpu(), v, bsk.AttnLayout.dense(
        64, 64, 64, device="cuda"), out=out), "different devices")
    assert (out == SENTINEL).all()


# ---------------------------------------------------------------- pre-pooled gate input (pooled=True)

def _gate_order_means(x, block, lens=None):
    """Block means of x [B, S, H, D] (fp32) in libbsk's pooling order: per block, 8 partial sums over rows
    r0+g, r0+g+8, ... added one row at a time, combined ((p0+p1)+(p2+p3))+((p4+p5)+(p6+p7)), divided by the
    row count in fp32; rows at or past lens[b] left out (blocks with none: 1e30, never candidates)."""
    B, S, H, D = x.shape
    n = -(-S // block)
    out = torch.empty((B, n, H, D), dtype=torch.float32)
    for b in range(B):
        end = S if lens is None else int(lens[b])
        for j in range(n):
            r0, r1 = j * block, min((j + 1) * block, end)
            if r1 <= r0:
                out[b, j] = 1e30
                continue
            p = [torch.zeros((H, D), dtype=torch.float32) for _ in range(8)]
            for r in range(r0, r1):
                p[(r - r0) & 7] = p[(r - r0) & 7] + x[b, r].float()
            s = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]))
            out[b, j] = s / torch.tensor(float(r1 - r0), dtype=torch.float32)
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [False, True])
def test_gate_pooled_equals_unpooled(device, causal):
    B, Sq, Sk, H, HK, D, block = 2, 45, 70, 4, 2, 16, (8, 10)
    q, k, _, _ = make_qkv(B, Sq, Sk, H, HK, D, torch.bfloat16, "bshd", "cpu", seed=31)
    kv_lens = torch.tensor([70, 33], dtype=torch.int32)
    g = torch.Generator().manual_seed(32)
    proj = (torch.randn(D, 5, generator=g), torch.randn(D, 5, generator=g)) if causal else (None, None)
    pq, pk = _gate_order_means(q, block[0]), _gate_order_means(k, block[1], kv_lens)
    assert pq.shape == (B, 6, H, D) and pk.shape == (B, 7, HK, D)
    want = bsk.topk_block_layout(q, k, block, 3, True, True, causal, *proj, kv_lens=kv_lens, causal_offset=4)
    to = (lambda t: None if t is None else t.to(device))
    got = bsk.topk_block_layout(pq.to(device), pk.to(device), block, 3, True, True, causal, *map(to, proj),
                                kv_lens=kv_lens.to(device), causal_offset=4, pooled=True, seq_q=Sq, seq_k=Sk)
    assert (got.seq_q, got.seq_k, got.batch, got.heads, got.capacity) == (Sq, Sk, B, H, 3)
    for a, b in ((got.full_count, want.full_count), (got.part_count, want.part_count)):
        assert torch.equal(a.cpu(), b)
    assert torch.equal(tile_mask_from_lists(got.to("cpu")), tile_mask_from_lists(want))
    # the [batch, heads, blocks, dim] order reads the same rows
    bh = bsk.topk_block_layout(pq.transpose(1, 2).contiguous().to(device), pk.transpose(1, 2).contiguous().to(device),
                               block, 3, True, True, causal, *map(to, proj), kv_lens=kv_lens.to(device),
                               causal_offset=4, pooled=True, seq_q=Sq, seq_k=Sk, layout_order="bhsd")
    assert torch.equal(tile_mask_from_lists(bh.to("cpu")), tile_mask_from_lists(want))
    # malformed pooled shapes: one row per block, or the lengths say otherwise
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: bsk.topk_block_layout(pq[:, :5].to(device), pk.to(device), block, 3,
                                                                    pooled=True, seq_q=Sq, seq_k=Sk))
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: bsk.topk_block_layout(pq.to(device), pk.to(device), block, 3,
                                                                    pooled=True, seq_q=Sq, seq_k=Sk + 10))
    _raises("BSK_ERR_SHAPE_MISMATCH", lambda: bsk.topk_block_layout(q.to(device), k.to(device), block, 3, seq_q=Sq + 1))
    # default lengths: whole blocks
    whole = bsk.topk_block_layout(pq.to(device), pk.to(device), block, 3, pooled=True)
    assert (whole.seq_q, whole.seq_k) == (48, 70)
