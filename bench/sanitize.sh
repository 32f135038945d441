#!/bin/bash
# sanitize.sh — compute-sanitizer over the short GPU tests of every kernel family (device machine, repo root, after
# a build): memcheck (out-of-bounds, malformed device indices included), racecheck (shared-memory hazards),
# synccheck (barrier use) and initcheck (uninitialised device reads). One line per (tool, test) and a summary last.
# Usage: bench/sanitize.sh [tool ...]   (default: memcheck racecheck synccheck initcheck)
#   SAN_TESTS="a b c": the bsk_tests filters to run (default below); SAN_TIMEOUT per run (default 150 s).
# Logs in $OUT/san_<tool>_<test>.log. Needs a Firecracker machine (uname -r ends in -gpu): no sanitizer under gVisor.
OUT=${OUT:-/tmp/san_out}
BIN=${BIN:-build/bin/bsk_tests}
mkdir -p "$OUT"
tools=${*:-memcheck racecheck synccheck initcheck}
tests=${SAN_TESTS:-"gpu_hopper_spmm_tails gpu_hopper_spmm_malformed_indices_safe gpu_hopper_spmm_partition_queues
  gpu_hopper_spmm_split gpu_hopper_spmm_op_t gpu_hopper_spmm_b64_modes gpu_hopper_spmm_empty_and_skewed
  gpu_hopper_small_tails gpu_hopper_small_malformed_indices_safe gpu_hopper_small_producers
  gpu_hopper_sddmm_split gpu_hopper_sddmm_malformed_indices_safe gpu_hopper_sddmm_empty_rows_and_nnz0
  gpu_attn_empty_and_sparse_extremes gpu_attn_topk_pooled gpu_attn_bwd_empty_and_extremes
  gpu_spmm_edges gpu_spmm_malformed_indices gpu_sddmm_simt_and_edges"}
pass=0; fail=0; lines=()
for tool in $tools; do
    for t in $tests; do
        log="$OUT/san_${tool}_$t.log"
        extra=""
        [ "$tool" = racecheck ] && extra="--racecheck-report all"
        t0=$(date +%s)
        timeout ${SAN_TIMEOUT:-150} compute-sanitizer --tool "$tool" $extra --error-exitcode 9 "$BIN" "$t" > "$log" 2>&1
        rc=$?
        sumline=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$log" | tail -1 | sed 's/=* *//')
        res=$(grep -E "passed, .* failed" "$log" | tail -1)
        if [ $rc -eq 0 ]; then pass=$((pass + 1)); v=ok; else fail=$((fail + 1)); v="FAIL rc=$rc"; fi
        lines+=("$(printf '%-4s %-10s %-44s %4ss  %s | %s' "$v" "$tool" "$t" $(( $(date +%s) - t0 )) "$sumline" "$res")")
    done
done
printf '%s\n' "${lines[@]}" | tee -a "$OUT/san_summary.txt"
echo "$pass passed, $fail failed" | tee -a "$OUT/san_summary.txt"
