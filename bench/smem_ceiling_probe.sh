#!/bin/bash
# smem_ceiling_probe.sh — one device run of bench/smem_ceiling_probe.cu (session 20): the TMA + wgmma ceiling of the
# b64 / dense tile shapes with no sparse bookkeeping. Builds the probe alone (it needs only tma.cu of the library),
# counts its HGMMAs in the SASS, runs it; log in $OUT. Args go to the probe (iters per CTA, timed repetitions).
set -o pipefail
OUT=${OUT:-/tmp/ceiling_out}; mkdir -p "$OUT"
nvcc -O2 -gencode arch=compute_90a,code=sm_90a -Iinclude -Isrc bench/smem_ceiling_probe.cu src/cuda/hopper/tma.cu \
    -o /tmp/smem_ceiling_probe -lcublas || { echo "BUILD FAILED"; exit 1; }
echo "HGMMA in the probe's SASS: $(cuobjdump -sass /tmp/smem_ceiling_probe | grep -c HGMMA)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
timeout 300 /tmp/smem_ceiling_probe "$@" 2>&1 | tee "$OUT/smem_ceiling.txt"
