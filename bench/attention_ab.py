"""bench/attention_ab.py — same-run A/B timings of bsk attention through Python (torch tensors, the extension)
against SDPA cuDNN, built to separate what the kernel does from how it is timed.

Why: the GPU's clock moves with power (1.6-1.98 GHz on an H100 under attention), so two figures taken one after
the other differ by up to 10 % for the same kernel. Here every compared call is timed round-robin — A, B, C, A, B,
C, ... each after an L2 flush, CUDA events around each call — so all of them see the same clock history, and the
median of each is compared. Parts:

  protocol  one problem (default: dense D=128, B4 H16 S8192 bf16 [B, S, H, D]) timed three ways: the
            benchmark's Timer (python -m blackwellsparsek.bench: 50 calls back to back), the C benchmark's way
            (`bsk attention`: 2 warm-up calls, then 5, each synchronised), and round-robin with cuDNN; plus the
            kernel's own duration from torch.profiler (CUPTI) next to the event time of the same calls;
  inputs    layout from_mask per head vs one shared dense layout; randn vs uniform [-1, 1) inputs (the C
            benchmark's); lse or not;
  ab        round-robin over bsk kernel builds (bsk._bsk._attn_variant) and cuDNN, per head dim.
SM clock and power are sampled with nvidia-smi during each part (--smi).

Usage (device machine): python3 bench/attention_ab.py [--parts protocol,inputs,ab] [--variants 4,5,8]
    [--dims 128,64] [--rounds 20] [--json out.json]
"""
import argparse
import json
import statistics
import subprocess
import sys
import time


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--parts", default="protocol,inputs,ab")
    p.add_argument("--variants", default="4,5,8")
    p.add_argument("--dims", default="128,64")
    p.add_argument("--densities", default="1.0", help="ab part: tile densities (random per head; cuDNN at 1.0 only)")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--json", default=None)
    p.add_argument("--smi", action="store_true", help="sample SM clock / power with nvidia-smi (20 ms)")
    return p.parse_args()


class Smi:
    """nvidia-smi sampling in the background; phase(name) marks wall-clock spans, summary() gives per phase the
    mean SM clock (MHz) and power (W)."""

    def __init__(self, on):
        self.proc, self.marks, self.on = None, [], on
        if on:
            try:
                self.proc = subprocess.Popen(
                    ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw", "--format=csv,noheader,nounits",
                     "-lms", "20"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            except OSError:
                self.proc = None

    def phase(self, name):
        self.marks.append((name, time.time()))

    def summary(self):
        if not self.proc:
            return {}
        self.phase("end")
        time.sleep(0.05)
        self.proc.terminate()
        out = self.proc.communicate()[0]
        samples = []
        for line in out.splitlines():
            try:
                ts, clk, pw = [x.strip() for x in line.split(",")]
                t = time.mktime(time.strptime(ts.split(".")[0], "%Y/%m/%d %H:%M:%S")) + float("0." + ts.split(".")[1])
                samples.append((t, float(clk), float(pw)))
            except (ValueError, IndexError):
                continue
        res = {}
        for (name, t0), (_, t1) in zip(self.marks, self.marks[1:]):
            s = [(c, w) for t, c, w in samples if t0 <= t < t1]
            if s:
                res[name] = {"sm_mhz": statistics.mean(c for c, _ in s), "sm_mhz_min": min(c for c, _ in s),
                             "power_w": statistics.mean(w for _, w in s), "n": len(s)}
        return res


def main():
    a = parse()
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import blackwellsparsek as bsk
    from blackwellsparsek import _bsk

    dev = "cuda"
    B, H, S, T = a.batch, a.heads, a.seq, 128
    mq = S // T
    flush = torch.empty(256 * 2**20, dtype=torch.int8, device=dev)
    smi = Smi(a.smi)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "B": B, "H": H, "S": S,
           "timing": "CUDA events per call, 256 MB L2 flush before each call outside the events; medians"}

    def flops(D):
        return 4.0 * B * H * S * S * D

    def tensors(D, kind="randn", seed=0):
        g = torch.Generator(device=dev).manual_seed(seed)
        if kind == "randn":
            q, k, v = (torch.randn((B, S, H, D), generator=g, device=dev).to(torch.bfloat16) for _ in range(3))
        else:
            q, k, v = ((torch.rand((B, S, H, D), generator=g, device=dev) * 2 - 1).to(torch.bfloat16) for _ in range(3))
        return q, k, v

    layout_mask = bsk.AttnLayout.from_mask(torch.ones((H, mq, mq), dtype=torch.bool, device=dev), S, S, T, device=dev)
    layout_dense = bsk.AttnLayout.dense(S, S, T, device=dev)

    def bsk_fn(q, k, v, o, layout, variant=0, lse=False):
        def run():
            old = _bsk._attn_variant(variant)
            try:
                bsk.block_sparse_attention(q, k, v, layout, out=o, return_lse=lse)
            finally:
                _bsk._attn_variant(old)
        return run

    def cudnn_fn(q, k, v):
        qh, kh, vh = (t.transpose(1, 2).contiguous() for t in (q, k, v))

        def run():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                F.scaled_dot_product_attention(qh, kh, vh)
        return run

    def flushed_call(f):
        """L2 flushed, then f() between two recorded events: (start, end), not yet synchronised."""
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        f()
        e.record()
        return s, e

    def round_robin(fns, rounds, warm=2):
        """{name: median ms} with the calls interleaved, each after a flush."""
        for _ in range(warm):
            for f in fns.values():
                f()
        torch.cuda.synchronize()
        ev = {n: [] for n in fns}
        for _ in range(rounds):
            for n, f in fns.items():
                ev[n].append(flushed_call(f))
        torch.cuda.synchronize()
        return {n: statistics.median(s.elapsed_time(e) for s, e in x) for n, x in ev.items()}

    def bench_timer(f, iters=50):
        """python -m blackwellsparsek.bench's Timer: flush + call back to back, no sync in between."""
        f()
        torch.cuda.synchronize()
        ev = []
        for _ in range(iters):
            ev.append(flushed_call(f))
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in ev)

    def c_timer(f, warm=2, iters=5):
        """bsk attention's cli_time_gpu: warm-up, then flush + call + synchronise, per iteration."""
        for _ in range(warm):
            f()
        torch.cuda.synchronize()
        t = []
        for _ in range(iters):
            s, e = flushed_call(f)
            e.synchronize()
            t.append(s.elapsed_time(e))
        return statistics.median(t)

    def kernel_times(f, iters=10):
        """(median event ms per call, median summed kernel ms per call) from torch.profiler."""
        from torch.profiler import ProfilerActivity, profile
        f()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            ev = []
            for _ in range(iters):
                ev.append(flushed_call(f))
            torch.cuda.synchronize()
        names = {}
        for x in prof.events():
            if x.device_type.name == "CUDA" and "flush" not in x.name and "fill" not in x.name.lower():
                d = getattr(x, "device_time", None) or getattr(x, "cuda_time", 0)
                names.setdefault(x.name[:60], []).append(d / 1000.0)
        ker = {n: {"count": len(v), "median_ms": statistics.median(v)} for n, v in names.items()}
        return statistics.median(s.elapsed_time(e) for s, e in ev), ker

    tf = lambda D, ms: flops(D) / (ms * 1e9)  # noqa: E731
    parts = a.parts.split(",")
    dims = [int(x) for x in a.dims.split(",")]
    variants = [int(x) for x in a.variants.split(",")]

    if "protocol" in parts:
        D = dims[0]
        q, k, v = tensors(D)
        o = torch.empty_like(q)
        f, c = bsk_fn(q, k, v, o, layout_mask), cudnn_fn(q, k, v)
        r = {}
        smi.phase("protocol_c_bsk")
        r["c_way_bsk"] = c_timer(f)
        smi.phase("protocol_c_cudnn")
        r["c_way_cudnn"] = c_timer(c)
        smi.phase("protocol_bench_bsk")
        r["bench_way_bsk"] = bench_timer(f)
        smi.phase("protocol_bench_cudnn")
        r["bench_way_cudnn"] = bench_timer(c)
        smi.phase("protocol_rr")
        rr = round_robin({"bsk": f, "cudnn": c}, a.rounds)
        r["round_robin_bsk"], r["round_robin_cudnn"] = rr["bsk"], rr["cudnn"]
        smi.phase("protocol_prof")
        ev_ms, ker = kernel_times(f)
        r["profiler_event_ms"], r["profiler_kernels"] = ev_ms, ker
        out["protocol"] = {"D": D, "ms": r, "tflops": {n: tf(D, x) for n, x in r.items() if isinstance(x, float)}}
        print(f"[protocol D={D}] " + "  ".join(f"{n} {tf(D, x):.1f}" for n, x in r.items() if isinstance(x, float)),
              flush=True)
        print(f"  profiler: event {ev_ms:.3f} ms/call; kernels " +
              "; ".join(f"{n} x{k['count']} {k['median_ms']:.3f} ms" for n, k in ker.items()), flush=True)
        del q, k, v, o

    if "inputs" in parts:
        D = dims[0]
        fns = {}
        data = {kind: tensors(D, kind) for kind in ("randn", "uniform")}
        os_ = {kind: torch.empty_like(data[kind][0]) for kind in data}
        for kind, (q, k, v) in data.items():
            fns[f"{kind}_mask"] = bsk_fn(q, k, v, os_[kind], layout_mask)
            fns[f"{kind}_dense"] = bsk_fn(q, k, v, os_[kind], layout_dense)
            fns[f"{kind}_lse"] = bsk_fn(q, k, v, os_[kind], layout_mask, lse=True)
            fns[f"{kind}_cudnn"] = cudnn_fn(q, k, v)
        smi.phase("inputs_rr")
        rr = round_robin(fns, a.rounds)
        out["inputs"] = {"D": D, "ms": rr, "tflops": {n: tf(D, x) for n, x in rr.items()}}
        print(f"[inputs D={D}] " + "  ".join(f"{n} {tf(D, x):.1f}" for n, x in rr.items()), flush=True)
        del data, os_, fns

    def random_layout(d, seed):
        g = torch.Generator(device=dev).manual_seed(seed)
        keep = min(mq, max(1, round(d * mq)))
        idx = torch.topk(torch.rand((H, mq, mq), generator=g, device=dev), keep, dim=2).indices
        tiles = torch.zeros((H, mq, mq), dtype=torch.bool, device=dev)
        tiles.scatter_(2, idx, True)
        return bsk.AttnLayout.from_mask(tiles, S, S, T, device=dev), tiles

    if "ab" in parts:
        out["ab"] = {}
        for D in dims:
            for dens in [float(x) for x in a.densities.split(",")]:
                q, k, v = tensors(D)
                o = torch.empty_like(q)
                lay, tiles = (layout_mask, None) if dens >= 1.0 else random_layout(dens, 7)
                fl = flops(D) if tiles is None else 4.0 * B * int(tiles.sum()) * T * T * D
                fns = {f"v{x}": bsk_fn(q, k, v, o, lay, variant=x) for x in variants}
                if tiles is None:
                    fns["cudnn"] = cudnn_fn(q, k, v)
                # correctness of each build against cuDNN on this problem (relative Frobenius error, heads 0..1)
                errs = {}
                qh, kh, vh = (t[:1, :, :2].transpose(1, 2).contiguous() for t in (q, k, v))
                em = None if tiles is None else tiles[:2].repeat_interleave(T, 1).repeat_interleave(T, 2)[None]
                ref = F.scaled_dot_product_attention(qh.float(), kh.float(), vh.float(), attn_mask=em)
                del em
                for x in variants:
                    o.fill_(float("nan"))
                    fns[f"v{x}"]()
                    got = o[:1, :, :2].transpose(1, 2).float()
                    errs[f"v{x}"] = float(torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)) \
                        if torch.isfinite(got).all() else float("inf")
                smi.phase(f"ab_D{D}_d{dens}")
                rr = round_robin(fns, a.rounds)
                out["ab"][f"D{D}_d{dens}"] = {"ms": rr, "tflops": {n: fl / (x * 1e9) for n, x in rr.items()},
                                              "rel_err": errs}
                print(f"[ab D={D} d={dens}] " + "  ".join(f"{n} {fl / (x * 1e9):.1f}" for n, x in rr.items()) +
                      "   err " + " ".join(f"{n}:{e:.1e}" for n, e in errs.items()), flush=True)
                del q, k, v, o, fns

    out["smi"] = smi.summary()
    for n, s in out["smi"].items():
        print(f"  smi {n}: SM {s['sm_mhz']:.0f} MHz (min {s['sm_mhz_min']:.0f}), {s['power_w']:.0f} W, {s['n']} samples")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
