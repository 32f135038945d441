"""Shared fixtures: the devices to run on (CPU always, CUDA when torch sees a GPU), random BSR inputs
(values uniform in [-1, 1), never zero) and the float64 reference with an error bound."""
import pytest
import torch

import blackwellsparsek as bsk

HAS_CUDA = torch.cuda.is_available() and bsk.device_info()["available"]
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Unit roundoff of each output dtype.
UNIT = {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}

needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device (torch or libbsk sees none)")


def nonzero_uniform(shape, dtype, device, generator=None):
    """Uniform in [-1, 1) with no zeros (|x| >= 1/16), rounded to `dtype`."""
    x = torch.rand(shape, generator=generator, dtype=torch.float64) * 2 - 1
    x = torch.where(x.abs() < 1 / 16, torch.full_like(x, 0.5), x)
    return x.to(dtype).to(device)


def random_bsr(rows, cols, block, density, dtype, device, seed=0):
    """A random BSRMatrix: each block kept with probability `density` (at least one block), values
    nonzero inside the matrix and zero in the padding of partial last blocks."""
    g = torch.Generator().manual_seed(seed)
    br, bc = block
    mb, nb = -(-rows // br), -(-cols // bc)
    mask = torch.rand((mb, nb), generator=g) < density
    mask[0, 0] = True
    dense = nonzero_uniform((mb * br, nb * bc), torch.float64, "cpu", g)
    dense[rows:, :] = 0
    dense[:, cols:] = 0
    dense = dense.reshape(mb, br, nb, bc).permute(0, 2, 1, 3) * mask[:, :, None, None]
    dense = dense.permute(0, 2, 1, 3).reshape(mb * br, nb * bc)[:rows, :cols]
    A = bsk.BSRMatrix.from_dense(dense.to(dtype), block)
    assert A.nnzb == int(mask.sum())
    return A.to(device)


def check_close(out, ref, absref, k, dtype, extra=0.0):
    """Every element within the fp32-accumulation bound plus one rounding of the output dtype.
    ref, absref: float64 (A@B and |A|@|B| of the dtype-rounded inputs); k: inner dimension;
    extra: a further allowance (e.g. for a rounding the computation makes on the way)."""
    assert out.shape == ref.shape
    out64 = out.detach().double().cpu()
    ref, absref = ref.cpu(), absref.cpu()
    assert torch.isfinite(out64).all(), "non-finite output (an element was not written?)"
    bound = (2 * k * 2.0**-24 + 2.0**-22) * absref + 2 * UNIT[dtype] * ref.abs() + extra + 1e-30
    err = (out64 - ref).abs()
    worst = torch.argmax(err - bound)
    assert (err <= bound).all(), (f"max excess at flat index {int(worst)}: got {out64.flatten()[worst]}, "
                                  f"want {ref.flatten()[worst]} ± {bound.flatten()[worst]}")


def replay_checked(fn, B, check, reps=3):
    """Capture C = fn() in a CUDA graph (after a warm-up outside it), then `reps` times: new contents in B (the
    graph's static input; seeded), C poisoned with NaN, replay, check(C). Returns C."""
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        C = fn()
    for seed in range(reps):
        B.copy_(nonzero_uniform(tuple(B.shape), B.dtype, B.device, torch.Generator().manual_seed(seed)))
        C.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        check(C)
    return C


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)
