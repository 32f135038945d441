"""python -m blackwellsparsek.bench: the Python package's benchmark on one CUDA GPU.

SpMM  C = A·B, A M x K block-sparse (b x b blocks, a uniform random pattern with round(d·K/b) blocks per
      block row), B K x N dense, bf16. Against: torch dense matmul of A's dense expansion (cuBLAS),
      torch.sparse._triton_ops.bsr_dense_mm, torch.sparse.mm on a CSR copy (cuSPARSE; a few iterations, skipped
      where one call takes > --csr-max-s), stk (when installed). TFLOPS count the kept blocks only,
      2·nnzb·b·b·N / t; E = that ÷ the dense matmul's TFLOPS in the same run. Every sparse result is checked
      against the dense one (relative Frobenius error); a result over --tol shows no figure.
Attention  non-causal, q/k/v [B, S, H, D] bf16, a random per-(head, query block) tile layout of density d
      (at least one tile per row, shared by the batch): bsk.block_sparse_attention vs torch SDPA (flash, dense)
      and FlexAttention (torch.compile'd) with the same BlockMask. TFLOPS on kept tiles: 4·B·H·tiles·128·128·D / t.
      bsk and Flex are checked against SDPA with the element mask on a slice (batch 0, two heads).
Timing: CUDA events around each call, L2 flushed (a 256 MB buffer written) before each, outside the timed
region; median of >= --min-iters after warm-up. Attention figures that are compared with each other (bsk, Flex and
SDPA cuDNN dense at each density; bsk, SDPA flash and cuDNN at D=64) are timed round-robin — one call of each in
turn — so that all of them see the same GPU clock: under sustained load an H100's SM clock falls from 1.98 to
~1.6 GHz with power, and a figure timed before another one reads up to ~10 % higher for that alone
(bench/attention_ab.py measured it; docs/attention-notes.md, session 4).

Output: a table on stdout, a progress line per configuration on stderr, JSON (--json, default
bench/results/python_bench_<date>.json) and, with matplotlib, a PNG of E vs density per block size (--png).
Without a CUDA device it says so and exits 0.
"""
import argparse
import datetime
import json
import os
import statistics
import sys
import time

FULL = dict(size=8192, blocks=(32, 64, 128), densities=(0.10, 0.25, 0.50), seq=8192)
QUICK = dict(size=4096, blocks=(64, 128), densities=(0.10, 0.50), seq=4096)
ATTN_DENSITIES = (0.10, 0.25, 0.50, 1.0)
ATTN_BATCH, ATTN_HEADS, ATTN_DIM, ATTN_BLOCK = 4, 16, 128, 128
DEVICE = "cuda"  # "cpu" only in a test's dry run of the code paths (wall-clock timing then)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m blackwellsparsek.bench",
                                description="Benchmark bsk.sparse_mm and bsk.block_sparse_attention against torch "
                                "dense / Triton BSR / cuSPARSE CSR / stk / SDPA / FlexAttention on one CUDA GPU.")
    p.add_argument("--quick", action="store_true", help="smaller grid: 4096, b in {64,128}, d in {0.1,0.5}, S=4096")
    p.add_argument("--only", choices=("spmm", "attention", "all"), default="all", help="which part to run")
    p.add_argument("--json", metavar="PATH", default=None,
                   help="JSON output (default: bench/results/python_bench_<date>.json)")
    p.add_argument("--png", metavar="PATH", default=None,
                   help="plot of E vs density (default: the JSON path with .png; needs matplotlib)")
    p.add_argument("--min-iters", type=int, default=10, help="timed iterations at least (default 10)")
    p.add_argument("--max-iters", type=int, default=50, help="timed iterations at most (default 50)")
    p.add_argument("--target-s", type=float, default=0.25,
                   help="aim for about this many seconds of timed calls per measurement (default 0.25)")
    p.add_argument("--csr-max-s", type=float, default=2.0,
                   help="skip torch.sparse.mm CSR where one call takes longer (default 2 s)")
    p.add_argument("--csr-iters", type=int, default=3, help="timed iterations for the CSR baseline (default 3)")
    p.add_argument("--tol", type=float, default=2e-2, help="relative error above which a result is marked wrong")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-flex", action="store_true", help="skip FlexAttention (its compile takes ~half a minute)")
    return p.parse_args(argv)


def _err(e):
    s = f"{type(e).__name__}: {e}".strip().replace("\n", " ")
    return s[:300]


def _sync(torch):
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def _empty_cache(torch):
    if DEVICE == "cuda":
        torch.cuda.empty_cache()


class Timer:
    """Median CUDA-event time (ms) of fn(), L2 flushed before every call outside the timed region."""

    def __init__(self, torch, args):
        self.torch, self.args = torch, args
        self.flush = torch.empty(256 * 2**20, dtype=torch.int8, device=DEVICE)

    def once_s(self, fn):
        """Wall time of one synchronised call (also the warm-up / compile)."""
        _sync(self.torch)
        t0 = time.perf_counter()
        fn()
        _sync(self.torch)
        return time.perf_counter() - t0

    def round_robin(self, fns, iters=None, warmup=1):
        """{name: (median ms, iters)} of the callables in `fns`, timed in turn (flush, event, call, event for
        each, then the next), so that every one sees the same clock history."""
        torch = self.torch
        est = 0.0
        for _ in range(max(1, warmup)):
            est = sum(self.once_s(f) for f in fns.values())
        if iters is None:
            iters = int(self.args.target_s / max(est, 1e-6))
            iters = max(self.args.min_iters, min(self.args.max_iters, iters))
        if DEVICE != "cuda":
            return {n: (statistics.median(self.once_s(f) * 1e3 for _ in range(iters)), iters) for n, f in fns.items()}
        ev = {n: [] for n in fns}
        for _ in range(iters):
            for n, f in fns.items():
                self.flush.zero_()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                f()
                e.record()
                ev[n].append((s, e))
        torch.cuda.synchronize()
        return {n: (statistics.median(s.elapsed_time(e) for s, e in x), iters) for n, x in ev.items()}

    def __call__(self, fn, iters=None, warmup=1):
        torch = self.torch
        est = 0.0
        for _ in range(max(1, warmup)):
            est = self.once_s(fn)
        if iters is None:
            iters = int(self.args.target_s / max(est, 1e-6))
            iters = max(self.args.min_iters, min(self.args.max_iters, iters))
        if DEVICE != "cuda":
            return statistics.median(self.once_s(fn) * 1e3 for _ in range(iters)), iters
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for i in range(iters):
            self.flush.zero_()
            starts[i].record()
            fn()
            ends[i].record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
        return statistics.median(times), iters


def _rel_err(torch, out, ref):
    out, ref = out.float(), ref.float()
    if not torch.isfinite(out).all():
        return float("inf")
    return float(torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30))


def _progress(total):
    try:
        from tqdm import tqdm
        bar = tqdm(total=total, file=sys.stderr, leave=True)

        def step(msg):
            bar.set_description(msg)
            bar.update(1)
        return step, bar.close
    except ImportError:
        count = [0]

        def step(msg):
            count[0] += 1
            print(f"[{count[0]}/{total}] {msg}", file=sys.stderr, flush=True)
        return step, (lambda: None)


def _measure(timer, rec, name, fn, check=None, tol=None, **kw):
    """Time fn into rec[name] = {ms, iters} or {error}; with check() -> rel err, a wrong result gets no figure."""
    try:
        if check is not None:
            fn()
            err = check()
            rec[name + "_rel_err"] = err
            if not err <= tol:
                rec[name] = {"error": f"wrong result: relative error {err:.3g} > {tol}"}
                return None
        ms, iters = timer(fn, **kw)
        rec[name] = {"ms": ms, "iters": iters}
        return ms
    except Exception as e:  # noqa: BLE001 - a baseline failing is a result, not a crash
        rec[name] = {"error": _err(e)}
        return None


def _measure_rr(timer, rec, entries, tol=None):
    """Round-robin version of _measure: entries = {name: (fn, check or None)}. Each fn runs once and is checked
    (a failure or a wrong result becomes rec[name] = {error} and leaves the round); the rest are timed together
    into rec[name] = {ms, iters}."""
    live = {}
    for name, (fn, check) in entries.items():
        try:
            fn()
            if check is not None:
                err = check()
                rec[name + "_rel_err"] = err
                if not err <= tol:
                    rec[name] = {"error": f"wrong result: relative error {err:.3g} > {tol}"}
                    continue
            live[name] = fn
        except Exception as e:  # noqa: BLE001 - a baseline failing is a result, not a crash
            rec[name] = {"error": _err(e)}
    if not live:
        return
    try:
        for name, (ms, iters) in timer.round_robin(live).items():
            rec[name] = {"ms": ms, "iters": iters}
    except Exception as e:  # noqa: BLE001
        for name in live:
            rec[name] = {"error": _err(e)}


# ---------------------------------------------------------------------------------------------------- SpMM

def _random_bsr(torch, bsk, n, b, d, gen):
    nb = n // b
    per_row = min(nb, max(1, round(d * nb)))
    scores = torch.rand((nb, nb), generator=gen, device=DEVICE)
    cols = torch.sort(torch.topk(scores, per_row, dim=1).indices, dim=1).values
    row_ptr = torch.arange(0, (nb + 1) * per_row, per_row, dtype=torch.int32, device=DEVICE)
    col_idx = cols.flatten().to(torch.int32).contiguous()
    values = torch.randn((col_idx.numel(), b, b), generator=gen, device=DEVICE).to(torch.bfloat16)
    return bsk.BSRMatrix(row_ptr, col_idx, values, (n, n), validate=False)


def bench_spmm(torch, bsk, timer, args, grid, step, t_start):
    n = grid["size"]
    tol = args.tol
    gen = torch.Generator(device=DEVICE).manual_seed(args.seed)
    B = torch.randn((n, n), generator=gen, device=DEVICE).to(torch.bfloat16)
    try:
        from torch.sparse._triton_ops import bsr_dense_mm
        if bsr_dense_mm is None:
            raise ImportError("torch.sparse._triton_ops.bsr_dense_mm is None (no Triton for this device)")
        triton_missing = None
    except Exception as e:  # noqa: BLE001
        bsr_dense_mm, triton_missing = None, _err(e)
    try:
        import stk
        stk_missing = None
    except Exception:  # noqa: BLE001
        stk, stk_missing = None, "not installed"
    csr_slow_from = None  # the lowest density whose CSR call exceeded csr_max_s: larger ones are skipped
    rows = []
    for b in grid["blocks"]:
        for d in grid["densities"]:
            rec = {"M": n, "N": n, "K": n, "block": b, "density": d, "dtype": "bfloat16"}
            A = _random_bsr(torch, bsk, n, b, d, gen)
            rec["nnzb"] = A.nnzb
            rec["density_actual"] = A.density
            flops = 2.0 * A.nnzb * b * b * n
            Ad = A.to_dense()
            C_ref = torch.empty((n, n), dtype=torch.bfloat16, device=DEVICE)
            dense_ms = _measure(timer, rec, "torch_dense", lambda: torch.mm(Ad, B, out=C_ref))
            torch.mm(Ad, B, out=C_ref)
            dense_tf = 2.0 * n * n * n / (dense_ms * 1e9) if dense_ms else None
            # The dense matmul's useful work is the kept blocks only: that is the figure E compares against.
            rec["torch_dense"]["tflops_dense"] = dense_tf
            if dense_ms:
                rec["torch_dense"]["tflops"] = flops / (dense_ms * 1e9)

            C = torch.empty_like(C_ref)
            _measure(timer, rec, "bsk", lambda: bsk.sparse_mm(A, B, out=C),
                     check=lambda: _rel_err(torch, C, C_ref), tol=tol)
            try:
                rec["bsk_kernel"] = bsk.last_kernel(DEVICE)
            except Exception:  # noqa: BLE001
                pass

            if bsr_dense_mm is not None:
                At = torch.sparse_bsr_tensor(A.row_ptr.long(), A.col_idx.long(), A.values, (n, n))
                Ct = torch.empty_like(C_ref)
                _measure(timer, rec, "triton_bsr", lambda: bsr_dense_mm(At, B, out=Ct),
                         check=lambda: _rel_err(torch, Ct, C_ref), tol=tol)
            else:
                rec["triton_bsr"] = {"error": triton_missing}

            rec["csr"] = _bench_csr(torch, timer, args, Ad, B, C_ref, d, csr_slow_from, t_start)
            if rec["csr"].get("slow"):
                csr_slow_from = d if csr_slow_from is None else min(csr_slow_from, d)

            if stk is not None:
                try:
                    As = stk.ops.to_sparse(Ad, b)
                    Cs = [None]

                    def run_stk():
                        Cs[0] = stk.ops.dsd(As, B)
                    _measure(timer, rec, "stk", run_stk, check=lambda: _rel_err(torch, Cs[0], C_ref), tol=tol)
                except Exception as e:  # noqa: BLE001
                    rec["stk"] = {"error": _err(e)}
            else:
                rec["stk"] = {"error": stk_missing}

            for name in ("bsk", "triton_bsr", "csr", "stk"):
                r = rec.get(name, {})
                if r.get("ms"):
                    r["tflops"] = flops / (r["ms"] * 1e9)
                    r["E"] = r["tflops"] / dense_tf if dense_tf else None
            rows.append(rec)
            step(f"spmm n={n} b={b} d={d}: bsk {_fmt_ms(rec['bsk'])} dense {_fmt_ms(rec['torch_dense'])}")
            _empty_cache(torch)
    return rows


def _bench_csr(torch, timer, args, Ad, B, C_ref, d, slow_from, t_start):
    if slow_from is not None and d >= slow_from:
        return {"error": f"skipped: one call at density {slow_from} took > {args.csr_max_s} s", "slow": True}
    if time.perf_counter() - t_start > 120:
        return {"error": "skipped: benchmark time budget (120 s into the run)"}
    rec = {}
    last = None
    for dt in (torch.bfloat16, torch.float32):
        try:
            Acsr = Ad.to(dt).to_sparse_csr()
            Bc = B.to(dt)
            out = [None]

            def run():
                out[0] = torch.sparse.mm(Acsr, Bc)
            one = timer.once_s(run)
            rec.update(dtype=str(dt).replace("torch.", ""), one_call_s=one)
            err = _rel_err(torch, out[0], C_ref)
            rec["rel_err"] = err
            if not err <= args.tol:
                rec["error"] = f"wrong result: relative error {err:.3g} > {args.tol}"
                return rec
            if one > args.csr_max_s:
                rec.update(error=f"skipped: one call took {one:.2f} s > {args.csr_max_s} s", slow=True)
                return rec
            ms, iters = timer(run, iters=args.csr_iters, warmup=0)
            rec.update(ms=ms, iters=iters)
            return rec
        except Exception as e:  # noqa: BLE001 - e.g. bf16 CSR unsupported: try fp32
            last = _err(e)
            rec["error_" + str(dt).replace("torch.", "")] = last
        finally:
            _empty_cache(torch)
    rec["error"] = last
    return rec


# ---------------------------------------------------------------------------------------------------- attention

def _random_tiles(torch, heads, mq, d, gen):
    keep = min(mq, max(1, round(d * mq)))
    scores = torch.rand((heads, mq, mq), generator=gen, device=DEVICE)
    idx = torch.topk(scores, keep, dim=2).indices
    tiles = torch.zeros((heads, mq, mq), dtype=torch.bool, device=DEVICE)
    tiles.scatter_(2, idx, True)
    return tiles


def bench_attention(torch, bsk, timer, args, grid, step):
    import torch.nn.functional as F
    Bt, H, S, D, T = ATTN_BATCH, ATTN_HEADS, grid["seq"], ATTN_DIM, ATTN_BLOCK
    mq = S // T
    gen = torch.Generator(device=DEVICE).manual_seed(args.seed + 1)
    q, k, v = (torch.randn((Bt, S, H, D), generator=gen, device=DEVICE).to(torch.bfloat16) for _ in range(3))
    qh, kh, vh = (t.transpose(1, 2).contiguous() for t in (q, k, v))  # [B, H, S, D] for torch
    o_bsk = torch.empty_like(q)
    info = {"B": Bt, "H": H, "S": S, "D": D, "block": T, "causal": False, "dtype": "bfloat16",
            "layout": "random per (head, query block), shared over the batch",
            "timing": "per density, bsk / Flex / SDPA cuDNN dense round-robin (Timer.round_robin)"}

    # SDPA dense, flash and cuDNN backends (cuDNN is the fastest dense attention torch offers on Hopper), timed
    # together; cuDNN is timed again beside bsk and Flex at every density (the bsk/cudnn column uses that).
    sdpa = _sdpa_fns(torch, qh, kh, vh)
    info["sdpa_flash_dense"], info["sdpa_cudnn_dense"] = {}, {}
    if isinstance(sdpa, str):
        info["sdpa_flash_dense"] = info["sdpa_cudnn_dense"] = {"error": sdpa}
        sdpa = {}
    else:
        rec = {}
        _measure_rr(timer, rec, {name: (fn, None) for name, fn in sdpa.items()})
        for name in ("flash", "cudnn"):
            info[f"sdpa_{name}_dense"] = rec.get(name, {"error": "not run"})
            if info[f"sdpa_{name}_dense"].get("ms"):
                info[f"sdpa_{name}_dense"]["tflops"] = 4.0 * Bt * H * S * S * D / (info[f"sdpa_{name}_dense"]["ms"] * 1e9)
    sdpa_ms = info["sdpa_flash_dense"].get("ms")

    flex, flex_missing, create_block_mask, BlockMask = None, None, None, None
    if args.no_flex:
        flex_missing = "skipped (--no-flex)"
    else:
        try:
            from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention
            flex = torch.compile(flex_attention, dynamic=False)
        except Exception as e:  # noqa: BLE001
            flex_missing = _err(e)
    # One tile buffer read by one mask_mod for every density: the compiled kernel sees the same closure.
    tiles_buf = torch.zeros((H, mq, mq), dtype=torch.bool, device=DEVICE)

    def mask_mod(b, h, q_idx, kv_idx):
        return tiles_buf[h, q_idx // T, kv_idx // T]

    rows = []
    for d in ATTN_DENSITIES:
        tiles = _random_tiles(torch, H, mq, d, gen)
        tiles_buf.copy_(tiles)
        kept = Bt * int(tiles.sum())  # tiles over batch and heads
        flops = 4.0 * kept * T * T * D
        rec = {"density": d, "density_actual": kept / (Bt * H * mq * mq), "kept_tiles": kept}
        layout = bsk.AttnLayout.from_mask(tiles, S, S, T, device=DEVICE)

        # Reference on a slice: batch 0, heads {0, H-1}, SDPA with the element mask (math-grade accuracy).
        hs = [0, H - 1]
        emask = tiles[hs].repeat_interleave(T, 1).repeat_interleave(T, 2)[None]  # [1, 2, S, S]
        ref = F.scaled_dot_product_attention(qh[:1, hs], kh[:1, hs], vh[:1, hs], attn_mask=emask)
        del emask

        def check_bsk():
            return _rel_err(torch, o_bsk[:1, :, hs].transpose(1, 2), ref)
        entries = {"bsk": (lambda: bsk.block_sparse_attention(q, k, v, layout, out=o_bsk), check_bsk)}

        o_flex = [None]
        if flex is not None:
            try:
                t0 = time.perf_counter()
                try:
                    bm = create_block_mask(mask_mod, None, H, S, S, device=DEVICE, BLOCK_SIZE=T)
                    rec["block_mask_from"] = "create_block_mask"
                except Exception as e:  # noqa: BLE001 - e.g. out of memory evaluating H·S·S elements
                    rec["create_block_mask_error"] = _err(e)
                    counts = tiles.sum(2, dtype=torch.int32)[None]
                    order = torch.argsort(tiles.to(torch.int8), dim=2, descending=True, stable=True)
                    bm = BlockMask.from_kv_blocks(torch.zeros_like(counts), order.to(torch.int32)[None], counts,
                                                  order.to(torch.int32)[None], BLOCK_SIZE=T, mask_mod=mask_mod,
                                                  seq_lengths=(S, S))
                    rec["block_mask_from"] = "BlockMask.from_kv_blocks"
                rec["block_mask_s"] = time.perf_counter() - t0
                # Same tiles as bsk's layout? (partial + full kv blocks per query block)
                n_bm = bm.kv_num_blocks.sum() + (bm.full_kv_num_blocks.sum() if bm.full_kv_num_blocks is not None
                                                 else 0)
                rec["block_mask_tiles_match"] = bool(int(n_bm) * Bt == kept)

                def run_flex(bm=bm):
                    o_flex[0] = flex(qh, kh, vh, block_mask=bm)
                rec["flex_first_call_s"] = timer.once_s(run_flex)  # includes compile on the first density
                entries["flex"] = (run_flex, lambda: _rel_err(torch, o_flex[0][:1, hs], ref))
            except Exception as e:  # noqa: BLE001
                rec["flex"] = {"error": _err(e)}
                flex, flex_missing = None, "failed earlier: " + _err(e)
        else:
            rec["flex"] = {"error": flex_missing}
        if "cudnn" in sdpa:
            entries["cudnn_dense"] = (sdpa["cudnn"], None)
        _measure_rr(timer, rec, entries, tol=args.tol)
        o_flex[0] = None

        cudnn_ms = rec.get("cudnn_dense", {}).get("ms")
        for name in ("bsk", "flex"):
            r = rec.get(name, {})
            if r.get("ms"):
                r["tflops"] = flops / (r["ms"] * 1e9)
                if sdpa_ms:
                    r["speedup_vs_sdpa_dense"] = sdpa_ms / r["ms"]
                if cudnn_ms:
                    r["speedup_vs_cudnn_dense"] = cudnn_ms / r["ms"]
        if cudnn_ms:
            rec["cudnn_dense"]["tflops"] = 4.0 * Bt * H * S * S * D / (cudnn_ms * 1e9)
        if rec["bsk"].get("ms") and rec.get("flex", {}).get("ms"):
            rec["bsk"]["speedup_vs_flex"] = rec["flex"]["ms"] / rec["bsk"]["ms"]
        rows.append(rec)
        step(f"attention S={S} d={d}: bsk {_fmt_ms(rec['bsk'])} flex {_fmt_ms(rec.get('flex', {}))}")
        _empty_cache(torch)
    info["rows"] = rows
    info["dense_d64"] = _dense_d64(torch, bsk, timer, args, Bt, H, S, T, gen)
    return info


def _sdpa_fns(torch, qh, kh, vh):
    """{"flash": fn, "cudnn": fn}: dense SDPA on [B, H, S, D] inputs with that backend alone; a string (why) when
    torch has no backend selection."""
    import torch.nn.functional as F
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except Exception as e:  # noqa: BLE001
        return _err(e)
    fns = {}
    for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        def run(be=be):
            with sdpa_kernel(be):
                F.scaled_dot_product_attention(qh, kh, vh)
        fns[name] = run
    return fns


def _dense_d64(torch, bsk, timer, args, Bt, H, S, T, gen):
    """Dense attention at head dim 64 (the issue's D=64 target): bsk with every tile kept, SDPA flash and cuDNN,
    timed round-robin; bsk checked against SDPA on a slice."""
    import torch.nn.functional as F
    D = 64
    q, k, v = (torch.randn((Bt, S, H, D), generator=gen, device=DEVICE).to(torch.bfloat16) for _ in range(3))
    qh, kh, vh = (t.transpose(1, 2).contiguous() for t in (q, k, v))
    mq = S // T
    layout = bsk.AttnLayout.from_mask(torch.ones((H, mq, mq), dtype=torch.bool, device=DEVICE), S, S, T,
                                      device=DEVICE)
    o = torch.empty_like(q)
    ref = F.scaled_dot_product_attention(qh[:1, :2], kh[:1, :2], vh[:1, :2])
    rec = {"D": D, "timing": "bsk, SDPA flash and cuDNN round-robin"}
    entries = {"bsk": (lambda: bsk.block_sparse_attention(q, k, v, layout, out=o),
                       lambda: _rel_err(torch, o[:1, :, :2].transpose(1, 2), ref))}
    sdpa = _sdpa_fns(torch, qh, kh, vh)
    if isinstance(sdpa, str):
        rec["flash"] = rec["cudnn"] = {"error": sdpa}
    else:
        entries.update({name: (fn, None) for name, fn in sdpa.items()})
    _measure_rr(timer, rec, entries, tol=args.tol)
    fl = 4.0 * Bt * H * S * S * D
    for name in ("bsk", "flash", "cudnn"):
        if rec.get(name, {}).get("ms"):
            rec[name]["tflops"] = fl / (rec[name]["ms"] * 1e9)
    rec["sdpa"] = {"flash": rec.pop("flash", {"error": "not run"}), "cudnn": rec.pop("cudnn", {"error": "not run"})}
    if rec["bsk"].get("ms"):
        for name in ("flash", "cudnn"):
            if rec["sdpa"][name].get("ms"):
                rec["bsk"]["speedup_vs_" + name] = rec["sdpa"][name]["ms"] / rec["bsk"]["ms"]
    return rec


# ---------------------------------------------------------------------------------------------------- output

def _fmt_ms(r):
    return f"{r['ms']:.3f} ms" if r.get("ms") else "-"


def _num(v, fmt):
    return fmt.format(v) if v is not None else "-".rjust(len(fmt.format(0.0)))


def _cell(r, key="tflops", fmt="{:7.1f}"):
    return _num(r.get(key) if isinstance(r, dict) else None, fmt)


def print_tables(result):
    out = []
    if result.get("spmm"):
        out.append("SpMM bf16 (TFLOPS on kept blocks, E = / torch dense TFLOPS; '-' = failed/skipped, see JSON)")
        out.append(f"{'n':>5} {'b':>4} {'d':>5} | {'dense':>7} | {'bsk':>7} {'E':>5} {'err':>8} | "
                   f"{'triton':>7} {'E':>5} | {'csr':>7} {'E':>5} | {'stk':>7} {'E':>5}")
        for r in result["spmm"]:
            dense_tf = r["torch_dense"].get("tflops_dense")
            line = (f"{r['M']:>5} {r['block']:>4} {r['density']:>5.2f} | "
                    f"{_num(dense_tf, '{:7.1f}')} | "
                    f"{_cell(r['bsk'])} {_cell(r['bsk'], 'E', '{:5.2f}')} "
                    f"{_num(r.get('bsk_rel_err'), '{:8.1e}')} | "
                    f"{_cell(r['triton_bsr'])} {_cell(r['triton_bsr'], 'E', '{:5.2f}')} | "
                    f"{_cell(r['csr'])} {_cell(r['csr'], 'E', '{:5.2f}')} | "
                    f"{_cell(r['stk'])} {_cell(r['stk'], 'E', '{:5.2f}')}")
            out.append(line)
        errs = {}
        for r in result["spmm"]:
            for name in ("bsk", "triton_bsr", "csr", "stk"):
                e = r[name].get("error")
                if e:
                    errs.setdefault((name, e), []).append(f"b={r['block']},d={r['density']}")
        for (name, e), where in errs.items():
            out.append(f"  {name}: {e}  [{'; '.join(where)}]")
    att = result.get("attention")
    if att:
        s = att["sdpa_flash_dense"]
        out.append("")
        out.append(f"Attention bf16 B={att['B']} H={att['H']} S={att['S']} D={att['D']} non-causal, "
                   f"tiles {att['block']}: SDPA flash dense "
                   + (f"{s['ms']:.3f} ms ({s['tflops']:.1f} TFLOPS)" if s.get("ms") else f"failed: {s.get('error')}"))
        c = att.get("sdpa_cudnn_dense", {})
        out.append("  SDPA cuDNN dense " + (f"{c['ms']:.3f} ms ({c['tflops']:.1f} TFLOPS)" if c.get("ms")
                                           else f"failed: {c.get('error')}")
                   + "; bsk/x = x ms / bsk ms")
        out.append(f"{'d':>5} | {'bsk ms':>8} {'TFLOPS':>7} {'err':>8} | {'flex ms':>8} {'TFLOPS':>7} | "
                   f"{'bsk/flex':>8} {'bsk/sdpa':>8} {'bsk/cudnn':>9} | {'cudnn TF':>8} (same round)")
        for r in att["rows"]:
            bk, fx = r["bsk"], r.get("flex", {})
            out.append(f"{r['density']:>5.2f} | {_cell(bk, 'ms', '{:8.3f}')} {_cell(bk)} "
                       f"{_num(r.get('bsk_rel_err'), '{:8.1e}')} | "
                       f"{_cell(fx, 'ms', '{:8.3f}')} {_cell(fx)} | {_cell(bk, 'speedup_vs_flex', '{:8.2f}')} "
                       f"{_cell(bk, 'speedup_vs_sdpa_dense', '{:8.2f}')} "
                       f"{_cell(bk, 'speedup_vs_cudnn_dense', '{:9.2f}')} | {_cell(r.get('cudnn_dense', {}), 'tflops', '{:8.1f}')}")
        for r in att["rows"]:
            for name in ("bsk", "flex"):
                e = r.get(name, {}).get("error")
                if e:
                    out.append(f"  d={r['density']} {name}: {e}")
        d64 = att.get("dense_d64")
        if d64:
            fl, cu, bk = d64["sdpa"]["flash"], d64["sdpa"]["cudnn"], d64["bsk"]
            out.append(f"Dense D=64: bsk {_cell(bk)} TFLOPS, SDPA flash {_cell(fl)}, cuDNN {_cell(cu)} "
                       f"(bsk/cudnn {_cell(bk, 'speedup_vs_cudnn', '{:.2f}')}; err {_num(d64.get('bsk_rel_err'), '{:.1e}')})"
                       + (f"  bsk: {bk['error']}" if bk.get("error") else ""))
    print("\n".join(out), flush=True)


def plot(result, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return None
    rows = result.get("spmm") or []
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, b in enumerate(sorted({r["block"] for r in rows})):
        color = f"C{i}"
        for name, style in (("bsk", "-o"), ("triton_bsr", "--x")):
            pts = [(r["density"], r[name]["E"]) for r in rows if r["block"] == b and r[name].get("E") is not None]
            if pts:
                ax.plot(*zip(*pts), style, color=color, label=f"{name} b={b}")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xlabel("block density")
    ax.set_ylabel("E = TFLOPS on kept blocks / dense TFLOPS")
    ax.set_title(f"SpMM bf16 n={rows[0]['M']} on {result['device']}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _commit():
    c = os.environ.get("BSK_COMMIT")
    if c:
        return c
    try:
        import subprocess
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5).stdout.strip() \
            or "unknown"
    except Exception:  # noqa: BLE001
        return "unknown"


def main(argv=None):
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print("blackwellsparsek.bench: torch is not installed; nothing to benchmark.")
        return 0
    if not torch.cuda.is_available():
        print("blackwellsparsek.bench: no CUDA device (torch.cuda.is_available() is False); nothing to benchmark.")
        return 0
    import blackwellsparsek as bsk
    dev_info = bsk.device_info()
    if not dev_info.get("available"):
        print("blackwellsparsek.bench: libbsk sees no CUDA device (built without CUDA?); nothing to benchmark. "
              f"device_info: {dev_info}")
        return 0
    return run(torch, bsk, args, QUICK if args.quick else FULL,
               device=torch.cuda.get_device_name(), capability=list(torch.cuda.get_device_capability()),
               bsk_device_info=dev_info)


def run(torch, bsk, args, grid, **device_facts):
    """The benchmark proper (main has checked the device): tables, JSON, PNG. Returns 0."""
    t_start = time.perf_counter()
    now = datetime.datetime.now(datetime.timezone.utc)
    result = {
        "benchmark": "blackwellsparsek.bench", "mode": "quick" if args.quick else "full", **device_facts,
        "torch": torch.__version__, "cuda": torch.version.cuda, "bsk": bsk.__version__,
        "commit": _commit(), "date": now.isoformat(timespec="seconds"), "args": vars(args),
        "timing": "CUDA events per call, L2 flushed (256 MB write) before each call outside the timed region, "
                  "median after warm-up",
    }
    try:
        import triton
        result["triton"] = triton.__version__
    except Exception:  # noqa: BLE001
        result["triton"] = None
    n_steps = (len(grid["blocks"]) * len(grid["densities"]) if args.only in ("spmm", "all") else 0) \
        + (len(ATTN_DENSITIES) if args.only in ("attention", "all") else 0)
    step, close = _progress(n_steps)
    timer = Timer(torch, args)
    with torch.no_grad():
        if args.only in ("spmm", "all"):
            try:
                result["spmm"] = bench_spmm(torch, bsk, timer, args, grid, step, t_start)
            except Exception as e:  # noqa: BLE001 - keep the attention part and the JSON
                result["spmm_error"] = _err(e)
        if args.only in ("attention", "all"):
            try:
                result["attention"] = bench_attention(torch, bsk, timer, args, grid, step)
            except Exception as e:  # noqa: BLE001
                result["attention_error"] = _err(e)
    close()
    result["wall_s"] = time.perf_counter() - t_start

    print_tables(result)
    for key in ("spmm_error", "attention_error"):
        if key in result:
            print(f"{key}: {result[key]}")
    json_path = args.json or os.path.join("bench", "results", f"python_bench_{now.strftime('%Y-%m-%d_%H%M%S')}.json")
    os.makedirs(os.path.dirname(os.path.abspath(json_path)), exist_ok=True)
    png_path = args.png or os.path.splitext(json_path)[0] + ".png"
    try:
        result["png"] = plot(result, png_path)
    except Exception as e:  # noqa: BLE001
        result["png_error"] = _err(e)
    with open(json_path, "w") as f:
        json.dump(result, f, indent=1, default=str)
    print(f"JSON: {json_path}" + (f"   PNG: {result['png']}" if result.get("png") else "")
          + f"   wall {result['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
