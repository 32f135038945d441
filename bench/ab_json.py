#!/usr/bin/env python3
"""ab_json.py — turn the log of bench/ab_build.sh (ab.log) into the results JSON kept in bench/results/.

Usage: bench/ab_json.py ab.log OUT.json --commit SHA --a "what A is" --b "what B is" [--note TEXT]
Reads the progress lines the `bsk bench spmm` and `bsk bench train` commands print per configuration, under
each "=== A|B (...): bsk CMD" header, and writes one JSON with the device, driver, date and every figure; the
per-configuration means of each side and their ratio B / A are added so the A/B can be read at a glance.
"""
import argparse, datetime, json, re, statistics, sys

SPMM = re.compile(r"\[\d+/\d+\] (\S+) b=(\d+) d=([\d.]+) (\w+): dense ([\d.]+), bsk ([\d.]+) TFLOPS, E ([\d.]+)")
TRAIN = re.compile(r"\[\d+/\d+\] (\S+) b=(\d+) d=([\d.]+) (\w+): E fwd ([\d.]+) dX ([\d.]+) dW ([\d.]+) step ([\d.]+), "
                   r"speedup ([\d.]+)x")
HEAD = re.compile(r"^=== ([AB]) \(.*\): bsk (\S+ \S+)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("out")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--note", default="")
    a = ap.parse_args()
    lines = open(a.log).read().splitlines()
    dev = lines[0].split(", ") if lines else ["?", "?"]
    runs, cur = [], None
    for ln in lines:
        m = HEAD.match(ln)
        if m:
            # runs of one command with and without --pattern-cache are different configurations
            cmd = m.group(2) + (" --pattern-cache" if "--pattern-cache" in ln else "")
            cur = {"side": m.group(1), "cmd": cmd, "rows": []}
            runs.append(cur)
            continue
        if cur is None:
            continue
        m = SPMM.search(ln)
        if m:
            cur["rows"].append({"shape": m.group(1), "block": int(m.group(2)), "density": float(m.group(3)),
                                "pattern": m.group(4), "cublas_tflops": float(m.group(5)),
                                "bsk_tflops": float(m.group(6)), "E": float(m.group(7))})
            continue
        m = TRAIN.search(ln)
        if m:
            cur["rows"].append({"shape": m.group(1), "block": int(m.group(2)), "density": float(m.group(3)),
                                "pattern": m.group(4), "E_fwd": float(m.group(5)), "E_dX": float(m.group(6)),
                                "E_dW": float(m.group(7)), "E_step": float(m.group(8)),
                                "speedup": float(m.group(9))})
    # mean per side and configuration, and B / A
    summary = {}
    for r in runs:
        for row in r["rows"]:
            key = f'{r["cmd"]} {row["shape"]} b={row["block"]} d={row["density"]} {row["pattern"]}'
            for f in ("E", "E_fwd", "E_dX", "E_dW"):
                if f in row:
                    summary.setdefault(f"{key} {f}", {"A": [], "B": []})[r["side"]].append(row[f])
    for k, v in summary.items():
        ma = statistics.mean(v["A"]) if v["A"] else None
        mb = statistics.mean(v["B"]) if v["B"] else None
        v["mean_A"], v["mean_B"] = ma, mb
        v["B_over_A"] = round(mb / ma, 4) if ma and mb else None
    doc = {"tool": "bench/ab_build.sh", "device": dev[0], "driver": dev[1] if len(dev) > 1 else "?",
           "date": datetime.date.today().isoformat(), "commit": a.commit, "A": a.a, "B": a.b,
           "order": "A B B A per command", "note": a.note, "runs": runs, "summary": summary}
    json.dump(doc, open(a.out, "w"), indent=1)
    for k, v in summary.items():
        print(f'{k:60s} A {v["mean_A"]:.3f} B {v["mean_B"]:.3f} B/A {v["B_over_A"]}')
    return 0 if runs else 1


if __name__ == "__main__":
    sys.exit(main())
