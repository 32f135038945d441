"""Autograd through bsk.block_sparse_attention (libbsk's bsk_attention_backward) against torch autograd of a
float64 dense masked reference.

The reference is plain masked attention in float64 built from the layout's lists (read with Python loops,
independently of the package), the key length and the causal rule, differentiated by torch. CPU runs
everywhere (fp32, fp16, bf16); the CUDA tests skip without a GPU.
"""
import math

import pytest
import torch

import blackwellsparsek as bsk
from conftest import DEVICES, HAS_CUDA, needs_cuda
from test_attention import element_mask, make_qkv, tile_mask_from_lists, to_bshd

# Norm-wise relative error of each gradient: the CPU backend computes in fp32 from inputs and an O rounded to
# the input dtype; tensor cores also round P and dS to it.
TOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.5e-2}  # measured: 2e-7, 3e-4, 2.4e-3
TOL_GPU = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 2e-2}  # C tests on H100: 3e-4, 2.6e-3


def ref_grads(ref, mask, W, w_lse=None, scale=None):
    """float64 (dq, dk, dv) [B, S, H, D] of L = sum(O * W) (+ sum(LSE * w_lse) over the rows that attend to
    something) for masked attention; empty rows give O = 0 and no gradient."""
    q, k, v = (t.clone().requires_grad_() for t in ref)
    H, HK, D = q.shape[2], k.shape[2], q.shape[3]
    kk, vv = k.repeat_interleave(H // HK, dim=2), v.repeat_interleave(H // HK, dim=2)
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    s = torch.einsum("bqhd,bkhd->bhqk", q, kk) * scale
    s = torch.where(mask, s, torch.full_like(s, -1e30))  # finite, so empty rows stay free of NaN
    p = torch.softmax(s, -1) * mask
    o = torch.einsum("bhqk,bkhd->bqhd", p, vv)
    loss = (o * W).sum()
    if w_lse is not None:
        nonempty = mask.any(-1)
        loss = loss + torch.where(nonempty, torch.logsumexp(s, -1), torch.zeros(())).mul(w_lse).sum()
    loss.backward()
    return q.grad, k.grad, v.grad


def rel(got, want):
    got = got.detach().cpu().double()
    assert torch.isfinite(got).all(), "non-finite gradient"
    den = want.norm()
    return float((got - want).norm() / (den if den > 0 else 1))


def layout_for(kind, Sq, Sk, block, device, B, H, seed=0):
    bq, bk = (block, block) if isinstance(block, int) else block
    if kind == "dense":
        return bsk.AttnLayout.dense(Sq, Sk, (bq, bk), device=device)
    if kind == "causal":
        return bsk.AttnLayout.causal(Sq, Sk, (bq, bk), Sk - Sq, device=device)
    if kind == "local":
        return bsk.AttnLayout.local(Sq, Sk, (bq, bk), 1, 1, 1, device=device)
    # a random per-(batch, head) mask with an empty query block
    g = torch.Generator().manual_seed(seed)
    mq, nb = -(-Sq // bq), -(-Sk // bk)
    m = torch.rand((B, H, mq, nb), generator=g) < 0.5
    m[0, 0, 1] = False
    return bsk.AttnLayout.from_mask(m, Sq, Sk, (bq, bk), device=device)


def run_case(device, dtype, order, kind, B=2, Sq=45, Sk=53, H=4, HK=2, D=16, block=16, kv_lens=None, with_lse=False,
             seed=1, tol=None):
    q, k, v, ref = make_qkv(B, Sq, Sk, H, HK, D, dtype, order, device, seed=seed)
    for t in (q, k, v):
        t.requires_grad_()
    layout = layout_for(kind, Sq, Sk, block, device, B, H, seed)
    g = torch.Generator().manual_seed(seed + 100)
    W = torch.randn((B, Sq, H, D), generator=g, dtype=torch.float64)
    w_lse = torch.randn((B, H, Sq), generator=g, dtype=torch.float64) if with_lse else None
    lens = None if kv_lens is None else torch.tensor(kv_lens, dtype=torch.int32, device=device)
    o, lse = bsk.block_sparse_attention(q, k, v, layout, layout_order=order, return_lse=True, kv_lens=lens)
    loss = (to_bshd(o, order).double() * W.to(device)).sum()
    if with_lse:
        loss = loss + (torch.where(torch.isinf(lse), torch.zeros_like(lse), lse).double() * w_lse.to(device)).sum()
    loss.backward()
    tiles = tile_mask_from_lists(layout)
    mask = element_mask(tiles, B, H, Sq, Sk, layout.block_q, layout.block_k, layout.is_causal, layout.causal_offset,
                        lens)
    want = ref_grads(ref, mask, W, w_lse)
    tol = tol if tol is not None else (TOL_GPU if device == "cuda" else TOL)[dtype]
    for name, t, w in zip("qkv", (q, k, v), want):
        assert t.grad is not None and t.grad.shape == t.shape and t.grad.dtype == t.dtype
        err = rel(to_bshd(t.grad, order), w)
        assert err <= tol, f"d{name}: rel err {err:.3e} > {tol:.1e} ({kind}, {dtype}, {order}, {device})"
    return q, k, v


@pytest.mark.parametrize("kind", ["dense", "causal", "local", "mask"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("order", ["bshd", "bhsd"])
def test_grads_match_torch_reference(kind, dtype, order):
    run_case("cpu", dtype, order, kind)


@pytest.mark.parametrize("device", DEVICES)
def test_kv_lens_gqa_and_lse_loss(device):
    run_case(device, torch.float32 if device == "cpu" else torch.bfloat16, "bshd", "mask", B=3, H=4, HK=1,
             Sq=70, Sk=90, D=64, block=64 if device == "cuda" else 16, kv_lens=[0, 37, 90], with_lse=True)


def test_gradcheck_cpu_float32():
    """torch.autograd.gradcheck in float32 (libbsk takes no float64): central differences with eps 1e-3 carry
    ~1e-4 of rounding, hence the loose tolerances."""
    q, k, v, _ = make_qkv(1, 10, 12, 2, 1, 4, torch.float32, "bshd", "cpu", seed=5)
    layout = bsk.AttnLayout.causal(10, 12, 4, 2)
    lens = torch.tensor([11], dtype=torch.int32)

    def f(q, k, v):
        o, lse = bsk.block_sparse_attention(q, k, v, layout, return_lse=True, kv_lens=lens, scale=0.8)
        return o, lse

    inputs = tuple(t.clone().requires_grad_() for t in (q, k, v))
    with pytest.warns(UserWarning, match="double precision"):
        assert torch.autograd.gradcheck(f, inputs, eps=1e-3, atol=2e-3, rtol=2e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_deterministic_bits(device):
    dtype = torch.float32 if device == "cpu" else torch.float16
    q, k, v, _ = make_qkv(2, 130, 130, 4, 2, 64, dtype, "bshd", device, seed=9)
    layout = bsk.AttnLayout.causal(130, 130, 64, device=device)
    grads = []
    for _ in range(2):
        qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
        o = bsk.block_sparse_attention(qq, kk, vv, layout)
        (o.float() ** 2).sum().backward()
        grads.append((qq.grad, kk.grad, vv.grad))
    for a, b in zip(*grads):
        assert torch.equal(a, b)


def test_packed_qkv_views_accumulate():
    """q, k, v as slices of one packed [B, S, 3, H, D] tensor: the gradients land in its three slices."""
    B, S, H, D = 2, 40, 2, 16
    g = torch.Generator().manual_seed(3)
    qkv = (torch.rand((B, S, 3, H, D), generator=g) * 2 - 1).requires_grad_()
    layout = bsk.AttnLayout.causal(S, S, 16)
    o = bsk.block_sparse_attention(qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], layout)
    W = torch.randn((B, S, H, D), generator=g)
    (o * W).sum().backward()
    ref = tuple(qkv.detach()[:, :, i].double() for i in range(3))
    mask = element_mask(tile_mask_from_lists(layout), B, H, S, S, 16, 16, True, 0)
    want = ref_grads(ref, mask, W.double())
    for i in range(3):
        assert rel(qkv.grad[:, :, i], want[i]) <= 1e-4


def test_only_some_inputs_need_grad_and_no_grad_mode():
    q, k, v, _ = make_qkv(1, 16, 16, 2, 2, 8, torch.float32, "bshd", "cpu")
    layout = bsk.AttnLayout.dense(16, 16, 8)
    v.requires_grad_()
    o = bsk.block_sparse_attention(q, k, v, layout)
    o.sum().backward()  # grad_out arrives as a stride-0 expand
    assert v.grad is not None and q.grad is None and k.grad is None
    assert torch.isfinite(v.grad).all()
    with torch.no_grad():
        assert not bsk.block_sparse_attention(q, k, v, layout).requires_grad


def test_double_backward_raises():
    q, k, v, _ = make_qkv(1, 16, 16, 2, 2, 8, torch.float32, "bshd", "cpu")
    q.requires_grad_()
    o = bsk.block_sparse_attention(q, k, v, bsk.AttnLayout.dense(16, 16, 8))
    (gq,) = torch.autograd.grad(o.sum(), q, create_graph=True)
    with pytest.raises(NotImplementedError, match="not itself differentiable"):
        gq.sum().backward()


@pytest.mark.parametrize("device", DEVICES)
def test_compile_backward_matches_eager(device):
    torch._dynamo.reset()
    layout = bsk.AttnLayout.causal(40, 40, 8 if device == "cpu" else 64, device=device)
    q, k, v, _ = make_qkv(2, 40, 40, 2, 1, 64, torch.float32 if device == "cpu" else torch.bfloat16, "bshd", device,
                          seed=18)

    def f(q, k, v):
        return (bsk.block_sparse_attention(q, k, v, layout).float() ** 2).sum()

    out = []
    for fn in (f, torch.compile(f, backend="aot_eager", fullgraph=True)):
        qq, kk, vv = (t.clone().requires_grad_() for t in (q, k, v))
        fn(qq, kk, vv).backward()
        out.append((qq.grad, kk.grad, vv.grad))
    for a, b in zip(*out):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_fake_backward_kernel():
    from torch._subclasses.fake_tensor import FakeTensorMode

    layout = bsk.AttnLayout.dense(30, 20, 8)
    with FakeTensorMode() as mode:
        arrays = [mode.from_tensor(t) for t in (layout.full_count, layout.full_idx, layout.part_count, layout.part_idx)]
        q, k = torch.empty(2, 4, 30, 16), torch.empty(2, 2, 20, 16)
        lse = torch.empty(2, 4, 30)
        dq, dk, dv = torch.ops.bsk.block_sparse_attention_backward(q, q, k, k, q, lse, None, *arrays, None, 30, 20, 8, 8,
                                                                   0.0, False, 0, True)
        assert dq.shape == q.shape and dk.shape == k.shape and dv.shape == k.shape


# ---------------------------------------------------------------- GPU (tensor-core and CUDA-core kernels)

@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("D,block", [(64, 64), (128, 128), (64, (128, 64))])
@pytest.mark.parametrize("kind", ["causal", "mask"])
def test_cuda_grads(dtype, D, block, kind):
    run_case("cuda", dtype, "bshd" if D == 64 else "bhsd", kind, B=2, Sq=200, Sk=230, H=4, HK=2, D=D, block=block,
             kv_lens=[230, 150])


@needs_cuda
def test_cuda_fallback_kernels():
    # fp32 and an odd head dim run the CUDA-core kernels
    run_case("cuda", torch.float32, "bshd", "causal", D=40, block=16)
    run_case("cuda", torch.float16, "bhsd", "local", D=24, block=(16, 32))


def test_cuda_flag_consistent():
    assert HAS_CUDA == ("cuda" in DEVICES)
