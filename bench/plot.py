#!/usr/bin/env python3
"""Summarise and plot a results file written by `bsk bench spmm|sddmm|train --json FILE`.

Prints a compact table of E (bsk's effective TFLOPS on kept blocks / dense baseline TFLOPS, same run):
one line per (shape, block size, pattern), one column per density. Then, when matplotlib is installed,
plots E against density per block size, one panel per (shape, pattern), to a PNG (cuSPARSE Blocked-ELL and
BSR dashed / dotted in the same colours where the file has them).
A `bsk bench train` file gives one table line per (shape, block size, pattern, product) and one panel per
(shape, pattern, block size): E of the forward SpMM, Aᵀ·B (dX), SDDMM (dW) and the whole step against
density, the step's speedup over the dense step written beside its points.

    python3 bench/plot.py bench/results/bench_spmm.json            # table + bench_spmm.png beside it
    python3 bench/plot.py results.json -o e.png --shape 8192x8192x8192
    python3 bench/plot.py results.json --text                       # the table only
"""
import argparse
import collections
import json
import math
import os
import sys


def shape_of(r):
    return "%dx%dx%d" % (r["M"], r["N"], r["K"])


def ratio(r, key):
    """E of implementation `key` in row r (None when it has no figure)."""
    if key == "bsk":
        e = r.get("E")
        return e if isinstance(e, (int, float)) and math.isfinite(e) else None
    fig, dense = r.get(key) or {}, r.get("dense") or {}
    t, d = fig.get("tflops"), dense.get("tflops")
    if fig.get("state") != "ok" or not t or not d:
        return None
    return t / d


def load(path):
    with open(path) as f:
        doc = json.load(f)
    if "results" not in doc:
        raise ValueError("%s: no 'results' (is it a `bsk bench --json` file?)" % path)
    return doc


def print_table(doc, shapes):
    meta, rows = doc.get("meta", {}), doc["results"]
    dev = meta.get("device", {})
    cfg = doc.get("config", {})
    print("%s on %s (cc %s), commit %s, %s; %s -> %s" % (
        meta.get("tool", "bsk bench"), dev.get("name", "?"), dev.get("cc", "-"), meta.get("commit", "?"),
        meta.get("date", "?"), cfg.get("dtype", "?"), cfg.get("out_dtype", "?")))
    print("E = bsk effective TFLOPS on kept blocks / %s TFLOPS" % cfg.get("baseline", "dense"))
    dens = sorted({r["density"] for r in rows})
    groups = collections.OrderedDict()
    for r in rows:
        if shape_of(r) in shapes:
            groups.setdefault((shape_of(r), r["block"], r["pattern"]), {})[r["density"]] = r
    print("%-18s %5s %-8s %7s  %s" % ("M x N x K", "b", "pattern", "dense", "  ".join("d=%-5.2f" % d for d in dens)))
    for (shape, b, pat), by_d in groups.items():
        any_row = next(iter(by_d.values()))
        dense = (any_row.get("dense") or {}).get("tflops")
        cells = []
        for d in dens:
            r = by_d.get(d)
            e = ratio(r, "bsk") if r else None
            bad = r and (r.get("bsk") or {}).get("state") in ("failed", "wrong")
            cells.append("%-7s" % ("%.3f" % e if e is not None else ("FAIL" if bad else "-")))
        print("%-18s %5d %-8s %7s  %s" % (shape, b, pat, ("%.1f" if dense >= 10 else "%.3g") % dense if dense else "-", "  ".join(cells)))


PRODUCTS = (("fwd", "fwd Y=W·X"), ("dx", "dX=Wᵀ·dY"), ("dw", "dW=dY·Xᵀ (SDDMM)"), ("step", "step"))


def is_train(doc):
    return (doc.get("config") or {}).get("op") == "train"


def train_e(r, key):
    e = (r.get(key) or {}).get("E")
    return e if isinstance(e, (int, float)) and math.isfinite(e) else None


def train_bad(r, key):
    return ((r.get(key) or {}).get("bsk") or {}).get("state") in ("failed", "wrong")


def print_train_table(doc, shapes):
    meta, rows, cfg = doc.get("meta", {}), doc["results"], doc.get("config", {})
    dev = meta.get("device", {})
    print("%s on %s (cc %s), commit %s, %s; %s -> %s, pattern cache %s" % (
        meta.get("tool", "bsk bench train"), dev.get("name", "?"), dev.get("cc", "-"), meta.get("commit", "?"),
        meta.get("date", "?"), cfg.get("dtype", "?"), cfg.get("out_dtype", "?"), cfg.get("pattern_cache", "?")))
    print("E = bsk effective TFLOPS on kept blocks / %s TFLOPS of the same product; speedup = dense step / bsk step"
          % cfg.get("baseline", "dense"))
    dens = sorted({r["density"] for r in rows})
    groups = collections.OrderedDict()
    for r in rows:
        if shape_of(r) in shapes:
            groups.setdefault((shape_of(r), r["block"], r["pattern"]), {})[r["density"]] = r
    print("%-18s %5s %-8s %-9s  %s" % ("M x N x K", "b", "pattern", "product", "  ".join("d=%-5.2f" % d for d in dens)))
    for (shape, b, pat), by_d in groups.items():
        for key, _ in PRODUCTS + (("speedup", "speedup"),):
            cells = []
            for d in dens:
                r = by_d.get(d)
                if r is None:
                    cells.append("%-7s" % "-")
                elif key == "speedup":
                    sp = r.get("speedup")
                    cells.append("%-7s" % ("%.2fx" % sp if isinstance(sp, (int, float)) and math.isfinite(sp) else "-"))
                else:
                    e = train_e(r, key)
                    cells.append("%-7s" % ("%.3f" % e if e is not None else ("FAIL" if train_bad(r, key) else "-")))
            print("%-18s %5d %-8s %-9s  %s" % (shape, b, pat, key, "  ".join(cells)))


def plot_train(doc, shapes, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)", file=sys.stderr)
        return False
    rows = [r for r in doc["results"] if shape_of(r) in shapes]
    panels = list(collections.OrderedDict.fromkeys((shape_of(r), r["pattern"]) for r in rows))
    blocks = sorted({r["block"] for r in rows})
    if not rows:
        print("nothing to plot", file=sys.stderr)
        return False
    fig, axes = plt.subplots(len(panels), len(blocks), figsize=(5.2 * len(blocks), 3.8 * len(panels)), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (shape, pat) in enumerate(panels):
        for j, b in enumerate(blocks):
            ax = axes[i][j]
            sel = sorted((r for r in rows if shape_of(r) == shape and r["pattern"] == pat and r["block"] == b),
                         key=lambda r: r["density"])
            for n, (key, label) in enumerate(PRODUCTS):
                pts = [(r["density"], train_e(r, key), r.get("speedup")) for r in sel]
                pts = [p for p in pts if p[1] is not None]
                if not pts:
                    continue
                step = key == "step"
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "-" if step else "--", marker="o" if step else ".",
                        lw=2.2 if step else 1.2, color="black" if step else colours[n % len(colours)], label=label)
                if step:
                    for x, y, sp in pts:
                        if isinstance(sp, (int, float)) and math.isfinite(sp):
                            ax.annotate("%.2fx" % sp, (x, y), textcoords="offset points", xytext=(0, 6), ha="center",
                                        fontsize=7)
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_title("%s, %s, b=%d" % (shape, pat, b))
            ax.set_xlabel("block density")
            ax.set_ylabel("E = bsk effective / dense")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            if i == 0 and j == len(blocks) - 1:
                ax.legend(fontsize=7)
    meta, cfg = doc.get("meta", {}), doc.get("config", {})
    fig.suptitle("%s on %s, %s (labels: step speedup vs dense)" % (
        meta.get("tool", "bsk bench train"), meta.get("device", {}).get("name", "?"), cfg.get("dtype", "?")))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("plot: %s" % out)
    return True


def plot(doc, shapes, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)", file=sys.stderr)
        return False
    rows = [r for r in doc["results"] if shape_of(r) in shapes]
    pats = [p for p in ("uniform", "skewed") if any(r["pattern"] == p for r in rows)]
    if not rows or not pats:
        print("nothing to plot", file=sys.stderr)
        return False
    fig, axes = plt.subplots(len(shapes), len(pats), figsize=(5.5 * len(pats), 3.8 * len(shapes)), squeeze=False)
    blocks = sorted({r["block"] for r in rows})
    colours = dict(zip(blocks, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    styles = (("bsk", "-", "o", "bsk"), ("cusparse_blocked_ell", "--", None, "cuSPARSE Blocked-ELL"),
              ("cusparse_bsr", ":", None, "cuSPARSE BSR"))
    for i, shape in enumerate(shapes):
        for j, pat in enumerate(pats):
            ax = axes[i][j]
            for b in blocks:
                sel = sorted((r for r in rows if shape_of(r) == shape and r["pattern"] == pat and r["block"] == b),
                             key=lambda r: r["density"])
                for key, ls, marker, label in styles:
                    pts = [(r["density"], ratio(r, key)) for r in sel]
                    pts = [(x, y) for x, y in pts if y is not None]
                    if pts:
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], ls, marker=marker, color=colours[b],
                                label="%s b=%d" % (label, b))
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_title("%s, %s" % (shape, pat))
            ax.set_xlabel("block density")
            ax.set_ylabel("E = effective / dense")
            ax.set_ylim(bottom=0)
            ax.grid(alpha=0.3)
            if i == 0 and j == len(pats) - 1:
                ax.legend(fontsize=7)
    dev = doc.get("meta", {}).get("device", {}).get("name", "?")
    fig.suptitle("%s on %s" % (doc.get("meta", {}).get("tool", "bsk bench"), dev))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("plot: %s" % out)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", help="a file written by bsk bench spmm|sddmm|train ... --json")
    ap.add_argument("-o", "--out", help="PNG to write (default: the JSON's name with .png)")
    ap.add_argument("--shape", action="append", help="MxNxK to include (repeatable; default: every shape)")
    ap.add_argument("--text", action="store_true", help="print the table only, no plot")
    args = ap.parse_args()
    try:
        doc = load(args.json)
    except (OSError, ValueError) as e:
        print("plot.py: %s" % e, file=sys.stderr)
        return 2
    shapes = list(collections.OrderedDict.fromkeys(shape_of(r) for r in doc["results"]))
    if args.shape:
        shapes = [s for s in shapes if s in args.shape]
    train = is_train(doc)
    (print_train_table if train else print_table)(doc, shapes)
    if not args.text:
        (plot_train if train else plot)(doc, shapes, args.out or os.path.splitext(args.json)[0] + ".png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
