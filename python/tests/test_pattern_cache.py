"""The pattern cache (bsk.set_pattern_cache / bsk.forget_patterns, libbsk's bsk_set_pattern_cache): results are the
same with it on, call after call on one pattern, across patterns, after forget_patterns, and in a captured CUDA graph
(inside a capture the work lists are built in the graph, not cached). On the CPU it does nothing."""
import pytest
import torch

import blackwellsparsek as bsk
from conftest import check_close, needs_cuda, nonzero_uniform, random_bsr, replay_checked


def _check(A, B, C, dtype, transpose=False):
    Ad = A.to_dense().double()
    if transpose:
        Ad = Ad.t()
    check_close(C, Ad @ B.double(), Ad.abs() @ B.double().abs(), Ad.shape[1], dtype)


def test_pattern_cache_cpu_is_a_no_op():
    A = random_bsr(96, 64, (16, 16), 0.5, torch.float32, "cpu")
    B = nonzero_uniform((64, 24), torch.float32, "cpu")
    bsk.set_pattern_cache(True)
    try:
        for _ in range(2):
            _check(A, B, bsk.sparse_mm(A, B), torch.float32)
        bsk.forget_patterns()
        _check(A, B, bsk.sparse_mm(A, B), torch.float32)
    finally:
        bsk.set_pattern_cache(False)


@needs_cuda
@pytest.mark.parametrize("block", [32, 16, 64, 128], ids=lambda b: f"b{b}")
def test_pattern_cache_repeated_calls_cuda(block):
    """4096 x 2048 with N = 1024: enough items for the Hopper kernels (small-block lists at b = 32 / 16, the sorted
    units at b = 64 / 128), whose lists the cache keeps; the first call fills the entry, the later ones use it; the
    transposed product (the transpose index and, at b = 64 / 128, its own lists) in turn with the forward one."""
    dtype = torch.float16
    A = random_bsr(4096, 2048, (block, block), 0.3, dtype, "cuda", seed=1)
    A2 = random_bsr(4096, 2048, (block, block), 0.2, dtype, "cuda", seed=2)
    bsk.set_pattern_cache(True, "cuda")
    try:
        for i, (M, n) in enumerate([(A, 1024), (A, 512), (A2, 1024), (A, 1024), (A2, 256)]):
            B = nonzero_uniform((2048, n), dtype, "cuda", torch.Generator().manual_seed(i))
            C = bsk.sparse_mm(M, B)
            torch.cuda.synchronize()
            _check(M, B, C, dtype)
        X = nonzero_uniform((4096, 64), dtype, "cuda")
        for _ in range(2):
            At = bsk.sparse_mm(A, X, transpose_a=True)  # the transpose index, cached in the same entry
            torch.cuda.synchronize()
            _check(A, X, At, dtype, transpose=True)
            B = nonzero_uniform((2048, 512), dtype, "cuda")
            _check(A, B, bsk.sparse_mm(A, B), dtype)
        bsk.forget_patterns("cuda")
        B = nonzero_uniform((2048, 1024), dtype, "cuda")
        _check(A, B, bsk.sparse_mm(A, B), dtype)
    finally:
        bsk.set_pattern_cache(False, "cuda")


@needs_cuda
@pytest.mark.parametrize("block", [32, 128], ids=lambda b: f"b{b}")
@pytest.mark.parametrize("transpose", [False, True], ids=["AB", "AtB"])
def test_pattern_cache_cuda_graph(block, transpose):
    """Captured after cached eager calls (the entry and the workspace made outside the capture): inside the capture
    the lists, and with transpose_a=True the transpose index (the graph's own, built and freed in it), are built in
    the graph; the cached entry stays for the eager call after."""
    dtype = torch.bfloat16 if not transpose else torch.float16
    A = random_bsr(4096, 2048, (block, block), 0.3, dtype, "cuda", seed=3 + transpose)
    B = nonzero_uniform((4096 if transpose else 2048, 1024 if not transpose else 512), dtype, "cuda")
    run = lambda: bsk.sparse_mm(A, B, transpose_a=transpose)
    bsk.set_pattern_cache(True, "cuda")
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # warm-up outside capture
            for _ in range(2):
                run()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        replay_checked(run, B, lambda C: _check(A, B, C, dtype, transpose=transpose))
        _check(A, B, run(), dtype, transpose=transpose)  # eager again, the cached entry
    finally:
        torch.cuda.synchronize()
        bsk.set_pattern_cache(False, "cuda")
