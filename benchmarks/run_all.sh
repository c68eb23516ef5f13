#!/usr/bin/env bash
# Every benchmark on a GPU machine, each logged, one report. From the repository root:
#
#     bash benchmarks/run_all.sh                   # every benchmark, one after another
#     bash benchmarks/run_all.sh startup budgets   # some, by name (names: --list)
#     BASELINE=../memprof-before bash benchmarks/run_all.sh budgets fixture-diff
#
# $OUT (./bench-out) gets NAME.log of each and summary.txt: each one's exit code, wall time,
# the lines that judge (met or MISSED, PASS/FAIL/WARN, a ratio) and a failed one's last lines.
# A failure does not stop the others; the exit status is 1 if any failed. BASELINE, an older
# checkout, is timed beside this one by budgets and fixture-diff (which needs it).
set -u
OUT=${OUT:-bench-out}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export COLUMNS=${COLUMNS:-80}
NAMES=(gpu-tests check-beside-load pageable-ceiling fidelity overlap-and-bandwidth
    allocators-and-small-copies trace-check trace-overhead peer-reference startup budgets
    wall-profile fixture-diff pinlimit-reference)
[ "${1:-}" = --list ] && echo "${NAMES[*]}" && exit 0
[ $# -gt 0 ] && NAMES=("$@")
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
status=0
: >"$OUT/summary.txt"

bench() {  # bench NAME COMMAND...: run it, log it, and note its verdict lines in the summary
    local name=$1 start=$SECONDS code
    shift
    echo "== $name: $*" | tee -a "$OUT/summary.txt"
    "$@" >"$OUT/$name.log" 2>&1
    code=$?
    [ "$code" -ne 0 ] && status=1
    echo "   exit $code, $((SECONDS - start)) s" | tee -a "$OUT/summary.txt"
    {
        grep -E -i '(target|missed|\bmet\b|pass|fail|warn|ratio|within|[0-9.]+ ?x\b)' \
            "$OUT/$name.log" | head -n 20
        [ "$code" -ne 0 ] && tail -n 3 "$OUT/$name.log"  # why it failed
    } | sed 's/^/   | /' | tee -a "$OUT/summary.txt"
}

for name in "${NAMES[@]}"; do
    case $name in
    gpu-tests) bench gpu-tests "$PY" -m pytest -m gpu -q -rs -p no:cacheprovider tests/gpu ;;
    check-beside-load)  # check beside a second process copying: copy lines WARN or FAIL
        "$PY" benchmarks/copy_load.py 0 25 >"$OUT/copy_load.log" 2>&1 &
        load=$!
        sleep 4
        bench check-beside-load "$PY" -m memprof check --json "$OUT/check_beside_load.json"
        kill "$load" 2>/dev/null
        wait "$load" 2>/dev/null ;;
    pageable-ceiling)
        for run in 1 2 3; do
            bench "pinned-$run" "$PY" -m memprof pinned --power 20 --json "$OUT/pinned_$run.json"
        done
        bench pageable-ceiling "$PY" benchmarks/pageable_ceiling.py "$OUT/pinned_1.json" \
            "$OUT/pinned_2.json" "$OUT/pinned_3.json" ;;
    fidelity) bench fidelity "$PY" benchmarks/fidelity.py ;;
    overlap-and-bandwidth) bench overlap-and-bandwidth "$PY" benchmarks/overlap_and_bandwidth.py ;;
    allocators-and-small-copies) bench allocators-and-small-copies \
        "$PY" benchmarks/allocators_and_small_copies.py --out "$OUT/allocators-and-small-copies" ;;
    trace-check) bench trace-check "$PY" benchmarks/trace_check.py ;;
    trace-overhead) bench trace-overhead "$PY" benchmarks/trace_overhead.py ;;
    peer-reference)
        if [ "$gpus" -ge 2 ]; then
            bench peer-reference "$PY" benchmarks/peer_reference.py
        else
            echo "== peer-reference: skipped, $gpus GPU(s)" | tee -a "$OUT/summary.txt"
        fi ;;
    startup) bench startup "$PY" benchmarks/startup.py --runs 7 ;;
    budgets) bench budgets "$PY" benchmarks/budgets.py --runs "${RUNS:-3}" \
        ${BASELINE:+--baseline "$BASELINE"} ;;
    pinlimit-reference) bench pinlimit-reference "$PY" benchmarks/pinlimit_reference.py \
        --out "$OUT/pinlimit-reference" ;;
    wall-profile)
        for command in ${PROFILE:-compare sweep alloc managed}; do
            bench "wall-profile-$command" "$PY" benchmarks/wall_profile.py --top 45 -- \
                "$command" --quiet
        done ;;
    fixture-diff) bench fixture-diff env OUT="$OUT/fixture-diff" BASELINE="${BASELINE:-}" \
        bash benchmarks/fixture_diff.sh ;;
    *)
        echo "== $name: no benchmark of that name (names: --list)" | tee -a "$OUT/summary.txt"
        status=1 ;;
    esac
done
exit $status
