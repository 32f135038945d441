#!/bin/bash
# l2_partition_probe.sh — one device run for bench/l2_partition_probe.cu (session 8): which SMs share an L2
# partition (ncu: fabric sectors when SM 0 and SM s read the same 8 MB), then the timing of partition-aligned
# against partition-blind reads, then one ncu pass of the timing modes (fabric sectors, DRAM bytes). Logs in $OUT.
set -o pipefail
OUT=${OUT:-/tmp/l2p_out}; mkdir -p "$OUT"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
nvcc -O2 -gencode arch=compute_90a,code=sm_90a bench/l2_partition_probe.cu -o /tmp/l2p || { echo "BUILD FAILED"; exit 1; }
timeout 200 "$NCU" --csv --clock-control none --log-file "$OUT/l2p_discover.csv" \
    --metrics lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_srcunit_tex_op_read.sum -k regex:k_read \
    /tmp/l2p --discover > "$OUT/l2p_discover.txt" 2>&1; echo "discover rc=$?"
python3 - "$OUT" <<'PY'
import csv, sys, collections
out = sys.argv[1]
order = None
for l in open(out + "/l2p_discover.txt"):
    if l.startswith("order:"): order = [int(x) for x in l.split()[1:]]
rows = [r for r in csv.reader(open(out + "/l2p_discover.csv")) if len(r) > 10]
hdr = rows[0]; iid = hdr.index("ID"); im = hdr.index("Metric Name"); iv = hdr.index("Metric Value")
fab = {}
for r in rows[1:]:
    if r[im] == "lts__t_sectors_srcunit_ltcfabric.sum": fab[int(r[iid])] = float(r[iv].replace(",", ""))
v = [fab.get(i + 1, float("nan")) for i in range(len(order))]
lo, hi = min(v), max(v); thr = (lo + hi) / 2
part = [1 if x > thr else 0 for x in v]
with open(out + "/l2p_table.txt", "w") as f:
    for sm, p in zip(order, part): f.write("%d %d\n" % (sm, p))
print("fabric sectors with SM %d: min %.0f max %.0f threshold %.0f; 8 MB = %d sectors" % (order[0], lo, hi, thr, (8 << 20) // 32))
print("values sorted:", " ".join("%.0f" % x for x in sorted(v)))
bysm = sorted(zip(order, part, v))
print("partition by smid (0 = SM %d's):" % order[0])
print("".join(str(p) for _, p, _ in bysm))
print("smids:", bysm[0][0], "..", bysm[-1][0], "count", len(bysm), "partition 1 count", sum(part))
PY
timeout 120 /tmp/l2p --time "$OUT/l2p_table.txt" > "$OUT/l2p_time.txt" 2>&1; echo "time rc=$?"
timeout 120 "$NCU" --clock-control none -k regex:k_read --metrics \
gpu__time_duration.sum,lts__t_sectors_srcunit_ltcfabric.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct \
    /tmp/l2p --time "$OUT/l2p_table.txt" --once > "$OUT/l2p_time_ncu.txt" 2>&1; echo "time ncu rc=$?"
cat "$OUT/l2p_time.txt"
grep -E "__" "$OUT/l2p_time_ncu.txt" | awk '{printf "%s=%s%s ", $1, $3, $2} /ltcfabric/{print ""}'
