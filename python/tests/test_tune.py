"""The autotuner from Python (bsk.tune_sparse_mm, save_tune / load_tune / clear_tune / tune_entries over libbsk's
bsk_tune_* API): tune files round-trip and bad ones are refused with the table unchanged; on the CPU one kernel
runs and nothing is recorded; on the GPU the tuned class is recorded and the next sparse_mm of that class runs the
tuned kernel and is right."""
import pytest
import torch

import blackwellsparsek as bsk
from conftest import needs_cuda, nonzero_uniform, random_bsr


def _device_name():
    """The name tune files of this thread's contexts are keyed by: the GPU's where libbsk sees one, else 'cpu'."""
    info = bsk.device_info()
    return info["name"] if info["available"] else "cpu"


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_tune_file_round_trip_cpu(tmp_path):
    bsk.clear_tune()
    head = "bsk-tune 2 " + _device_name() + "\n"
    good = head + "spmm n 64 64 f16 f16 10 10 10 5 beta0 portable\nspmm t 64 64 f16 f16 10 10 10 5 beta1 simt\n"
    bsk.load_tune(_write(tmp_path, "good.txt", good))
    assert bsk.tune_entries() == 2
    out = str(tmp_path / "back.txt")
    bsk.save_tune(out)
    assert open(out).read() == good
    bad = {
        "bsk-tune 1 cpu\nspmm n 64 64 f16 f16 10 10 10 5 portable\n": "BSK_ERR_INVALID_ARGUMENT",  # version 1
        head + "spmm n 64 64 f16 f16 10 10 10 5 beta7 portable\n": "BSK_ERR_INVALID_ARGUMENT",
        "bsk-tune 2 some other GPU\nspmm n 64 64 f16 f16 10 10 10 5 beta0 portable\n": "BSK_ERR_UNSUPPORTED",
    }
    for i, (text, status) in enumerate(bad.items()):
        with pytest.raises(bsk.BSKError) as e:
            bsk.load_tune(_write(tmp_path, f"bad{i}.txt", text))
        assert e.value.status == status
        assert bsk.tune_entries() == 2  # unchanged
    with pytest.raises(bsk.BSKError):
        bsk.load_tune(str(tmp_path / "missing.txt"))
    bsk.clear_tune()
    assert bsk.tune_entries() == 0


def test_tune_sparse_mm_cpu_records_nothing():
    bsk.clear_tune()
    A = random_bsr(192, 128, (32, 32), 0.3, torch.float32, "cpu", seed=3)
    B = nonzero_uniform((128, 40), torch.float32, "cpu")
    r = bsk.tune_sparse_mm(A, B, iters=2)
    assert r["family"] == "cpu" and r["kernel"] and r["default_kernel"] == r["kernel"]
    assert bsk.tune_entries() == 0
    with pytest.raises(bsk.BSKError) as e:  # shape mismatch checked like sparse_mm
        bsk.tune_sparse_mm(A, nonzero_uniform((96, 40), torch.float32, "cpu"))
    assert e.value.status == "BSK_ERR_SHAPE_MISMATCH"


@needs_cuda
@pytest.mark.parametrize("transpose", [False, True])
def test_tune_sparse_mm_cuda(tmp_path, transpose):
    bsk.clear_tune("cuda")
    A = random_bsr(512, 384, (64, 64), 0.25, torch.float16, "cuda", seed=5)
    B = nonzero_uniform((512 if transpose else 384, 256), torch.float16, "cuda")
    r = bsk.tune_sparse_mm(A, B, transpose_a=transpose, iters=3)
    assert r["family"] in ("hopper", "hopper-small", "portable", "simt")
    assert r["ms"] > 0 and r["default_ms"] > 0 and r["kernel"] and r["default_kernel"]
    assert bsk.tune_entries("cuda") == 1
    C = bsk.sparse_mm(A, B, transpose_a=transpose)
    assert bsk.last_kernel("cuda") == r["kernel"]
    D = A.to_dense().double()
    ref = (D.t() if transpose else D) @ B.double()
    err = (C.double() - ref).norm() / ref.norm()
    assert err < 4e-3, err
    p = str(tmp_path / "cuda_tune.txt")
    bsk.save_tune(p, "cuda")
    bsk.clear_tune("cuda")
    bsk.load_tune(p, "cuda")
    assert bsk.tune_entries("cuda") == 1
    assert open(p).read().startswith("bsk-tune 2 " + _device_name() + "\n")
    bsk.clear_tune("cuda")
