"""blackwellsparsek.bench without a GPU: it imports, parses its arguments, --help works, main() exits 0 with a
message when there is no CUDA device, and a CPU dry run of its code paths (tiny sizes, no FlexAttention
compile) produces every figure and a consistent JSON. No timing is asserted."""
import json

import pytest
import torch

import blackwellsparsek as bsk
from blackwellsparsek import bench


def test_parse_args_defaults_and_quick():
    a = bench.parse_args([])
    assert not a.quick and a.only == "all" and a.min_iters >= 10 and a.json is None
    a = bench.parse_args(["--quick", "--only", "spmm", "--json", "x.json", "--png", "x.png"])
    assert a.quick and a.only == "spmm" and a.json == "x.json" and a.png == "x.png"
    assert bench.QUICK["size"] == 4096 and bench.FULL["size"] == 8192
    with pytest.raises(SystemExit):
        bench.parse_args(["--only", "nonsense"])


def test_help(capsys):
    with pytest.raises(SystemExit) as e:
        bench.parse_args(["--help"])
    assert e.value.code == 0
    assert "--quick" in capsys.readouterr().out


@pytest.mark.skipif(torch.cuda.is_available(), reason="with CUDA, main() would run the real benchmark")
def test_main_without_cuda_exits_zero(capsys, tmp_path):
    assert bench.main(["--json", str(tmp_path / "r.json")]) == 0
    assert "no CUDA device" in capsys.readouterr().out
    assert not (tmp_path / "r.json").exists()


def test_cpu_dry_run(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(bench, "DEVICE", "cpu")
    monkeypatch.setattr(bench, "ATTN_BATCH", 1)
    monkeypatch.setattr(bench, "ATTN_HEADS", 2)
    monkeypatch.setattr(bench, "ATTN_DIM", 64)
    monkeypatch.setattr(bench, "ATTN_DENSITIES", (0.5, 1.0))
    path = tmp_path / "r.json"
    args = bench.parse_args(["--quick", "--no-flex", "--min-iters", "1", "--max-iters", "2", "--json", str(path),
                             "--png", str(tmp_path / "r.png")])
    grid = dict(size=128, blocks=(32,), densities=(0.25, 0.5), seq=256)
    assert bench.run(torch, bsk, args, grid, device="cpu (dry run)") == 0
    out = capsys.readouterr().out
    assert "SpMM" in out and "Attention" in out
    r = json.loads(path.read_text())
    assert r["device"] == "cpu (dry run)" and r["torch"] == torch.__version__ and "commit" in r and "date" in r
    assert len(r["spmm"]) == 2
    for row in r["spmm"]:
        assert row["nnzb"] == round(row["density"] * 4) * 4  # exact per-row count of a 4x4 block grid
        assert row["bsk_rel_err"] < 1e-2 and row["bsk"]["ms"] > 0 and row["bsk"]["E"] > 0
        assert row["torch_dense"]["tflops_dense"] > 0
    att = r["attention"]
    assert att["S"] == 256 and len(att["rows"]) == 2
    for row in att["rows"]:
        assert row["bsk_rel_err"] < 2e-2 and row["bsk"]["tflops"] > 0
        assert row["flex"]["error"].startswith("skipped")
    assert att["rows"][-1]["kept_tiles"] == 1 * 2 * 2 * 2  # density 1: every tile
    assert "sdpa_cudnn_dense" in att and "sdpa_flash_dense" in att  # a figure, or the backend's error
    d64 = att["dense_d64"]
    assert d64["D"] == 64 and d64["bsk_rel_err"] < 2e-2 and d64["bsk"]["tflops"] > 0
