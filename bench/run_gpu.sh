#!/bin/bash
# run_gpu.sh — the device run: build for sm_90a, the whole test suite (CPU + GPU), the SpMM benchmark grid
# vs cuBLAS / cuSPARSE (JSON), the SASS check; stage "py" installs the Python package and runs its tests;
# stage "san" runs compute-sanitizer on the GPU suite's edge tests; stage "train" runs the training-step
# benchmark (fwd SpMM, Aᵀ·B, SDDMM and the whole step vs cuBLAS; JSON in $OUT/train_bench.json) and prints its
# table; stage "attn" runs the attention benchmark with the gate's share (`bsk attention`, JSON in
# $OUT/attention.json). "main" = "tests" + "bench" (the SpMM grid). A short table is printed last.
# Usage (device machine, repo root): BSK_COMMIT=<sha> bench/run_gpu.sh [main|tests|bench|py|san|train|attn ...]
# (default: main)
set -o pipefail
OUT=${OUT:-bench/results}
# $OUT gets the results (the device tool brings back at most 8 files); build / error / sanitizer logs go to $LOG
LOG=${LOG:-/tmp/bsk_run_logs}
mkdir -p "$OUT" "$LOG"
stages=${*:-main}
summary=()
build() {
    [ -x build/bin/bsk_tests ] && [ -x build/bin/bsk ] && return 0
    t0=$(date +%s)
    make JOBS=16 GENCODE_PORTABLE='-gencode arch=compute_90a,code=sm_90a' all > "$LOG/build.log" 2>&1 \
        || { tail -30 "$LOG/build.log"; echo "BUILD FAILED"; exit 1; }
    summary+=("build: $(( $(date +%s) - t0 )) s")
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
build
for st in $stages; do
  case $st in
  main|tests|bench)
    [ "$st" = bench ] || {
    timeout 540 build/bin/bsk_tests > "$OUT/tests.log" 2>&1; rc=$?
    grep -E "^FAIL|failed \(|CHECK|REQUIRE|rel err" "$OUT/tests.log" | head -20
    summary+=("tests (all): rc=$rc $(tail -1 "$OUT/tests.log")")
    }
    [ "$st" = tests ] && continue
    build/bin/bsk preflight
    make sass 2>/dev/null | grep -E "HGMMA" | sort | uniq -c | head -5 > "$LOG/sass.txt"
    summary+=("sass: $(grep -c HGMMA "$LOG/sass.txt") kernel lines with HGMMA")
    timeout 300 build/bin/bsk bench spmm --json "$OUT/spmm_bench.json" > "$OUT/bench.txt" 2> "$LOG/bench.err"; rc=$?
    summary+=("bench spmm: rc=$rc")
    ;;
  py)
    t0=$(date +%s)
    BSK_BUILD=build python3 -m pip install -q --no-build-isolation --no-deps --no-cache-dir --target /tmp/site . \
        > "$LOG/py_build.log" 2>&1 || { tail -20 "$LOG/py_build.log"; summary+=("python: BUILD FAILED"); }
    export PYTHONPATH=/tmp/site
    timeout 200 python3 -m pytest -q -p no:cacheprovider -rs python/tests > "$OUT/pytest.log" 2>&1; rc=$?
    grep -E "FAILED|Error" "$OUT/pytest.log" | head -15
    summary+=("pytest: rc=$rc $(tail -1 "$OUT/pytest.log") ($(( $(date +%s) - t0 )) s)")
    timeout 60 python3 python/examples/train_block_sparse_mlp.py > "$LOG/example.log" 2>&1
    summary+=("example: $(tail -1 "$LOG/example.log")")
    ;;
  san)
    timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/bsk_tests gpu_spmm_edges > "$LOG/memcheck.log" 2>&1
    summary+=("memcheck gpu_spmm_edges: rc=$? $(grep -E 'ERROR SUMMARY' "$LOG/memcheck.log" | tail -1)")
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 build/bin/bsk_tests gpu_spmm_malformed > "$LOG/memcheck2.log" 2>&1
    summary+=("memcheck gpu_spmm_malformed: rc=$? $(grep -E 'ERROR SUMMARY' "$LOG/memcheck2.log" | tail -1)")
    ;;
  attn)
    timeout 300 build/bin/bsk attention --iters 10 --json "$OUT/attention.json" > "$OUT/attention.txt" 2> "$LOG/attention.err"; rc=$?
    summary+=("bench attention: rc=$rc")
    attn_ran=1
    ;;
  train)
    timeout 420 build/bin/bsk bench train --json "$OUT/train_bench.json" > "$OUT/train.txt" 2> "$LOG/train.err"; rc=$?
    grep -E "WRONG|fail|error" "$LOG/train.err" | head -10
    summary+=("bench train: rc=$rc ($(grep -c '^\[' "$LOG/train.err") configurations)")
    train_ran=1
    ;;
  esac
done
[ -f "$OUT/bench.txt" ] && tail -45 "$OUT/bench.txt"
[ -n "$train_ran" ] && cat "$OUT/train.txt"
[ -n "$attn_ran" ] && cat "$OUT/attention.txt"
printf '%s\n' "${summary[@]}"
