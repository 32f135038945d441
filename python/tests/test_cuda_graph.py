"""CUDA graph capture of sparse_mm (GPU only): the op runs on torch's current stream with no host
synchronisation, so it captures, and replays read the static inputs' new contents."""
import pytest
import torch

import blackwellsparsek as bsk
from conftest import check_close, needs_cuda, nonzero_uniform, random_bsr, replay_checked

pytestmark = needs_cuda


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_cuda_graph_capture_and_replay(dtype):
    A = random_bsr(256, 192, (64, 64), 0.5, dtype, "cuda")
    B = nonzero_uniform((192, 128), dtype, "cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside capture (allocations, lazy module loading)
        for _ in range(2):
            bsk.sparse_mm(A, B)
            bsk.sparse_mm(A, torch.zeros(256, 8, dtype=dtype, device="cuda"), transpose_a=True)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()

    Ad = A.to_dense().double()
    replay_checked(lambda: bsk.sparse_mm(A, B), B,
                   lambda C: check_close(C, Ad @ B.double(), Ad.abs() @ B.double().abs(), 192, dtype))


def test_runs_on_current_stream():
    """Work queued on a side stream is ordered after that stream's earlier work, without a sync."""
    A = random_bsr(512, 512, (64, 64), 0.5, torch.float32, "cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        B = torch.empty(512, 256, device="cuda")
        B.copy_(nonzero_uniform((512, 256), torch.float32, "cpu").pin_memory(), non_blocking=True)
        C = bsk.sparse_mm(A, B)
    s.synchronize()
    Ad = A.to_dense().double()
    check_close(C, Ad @ B.double(), Ad.abs() @ B.double().abs(), 512, torch.float32)


def test_last_kernel_on_gpu():
    A = random_bsr(256, 256, (64, 64), 0.5, torch.bfloat16, "cuda")
    bsk.sparse_mm(A, nonzero_uniform((256, 128), torch.bfloat16, "cuda"))
    torch.cuda.synchronize()
    name = bsk.last_kernel("cuda")
    print("kernel:", name)
    assert name not in ("none", "cpu")
