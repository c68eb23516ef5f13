#!/usr/bin/env bash
# Everything issues 21 to 25 need from the GPU machine, by step. Run from the repository root:
#
#     OUT=/some/dir bash benchmarks/issues21_25_gpu.sh gpu-tests fixtures checks
#
# Steps:
#   gpu-tests     every test marked gpu (pytest -m gpu)
#   fixtures      tools/record_fixtures.sh for this GPU (h200 or h100, from its name)
#   fixture-diff  benchmarks/fixture_diff.sh: every fixture recorded by BASELINE and by this
#                 checkout twice, diffed A -> B beside B -> B'
#   checks        `memprof check --retries 2` three times, each saved with its JUnit XML
#   startup       benchmarks/startup.py: start-up ratios, and pinned against a bare program
#   report-scale  benchmarks/report_scale.py: 100,000 measurements against json.load
#   budgets       benchmarks/budgets.py against BASELINE (a checkout of an older memprof)
#   noise         benchmarks/noise.py: repetitions each noise target needs
#   fidelity      benchmarks/fidelity.py; trace-overhead: benchmarks/trace_overhead.py
#   small-copies  benchmarks/allocators_and_small_copies.py
#   profile       where the time goes: benchmarks/wall_profile.py of each long command
#                 (profile-CMD.log), and startup.py --profile (cProfile of pinned --power 20)
# Each writes $OUT/STEP.log; steps.log says each step's exit code and wall time. A step that
# fails does not stop the others; the exit status is 1 if any failed.
set -u
OUT=${OUT:-gpu-out}
BASELINE=${BASELINE:-}
mkdir -p "$OUT"
status=0
# the installed command is memprof's own script (Ctrl-C from its first instruction), where
# the device kit's shim (python3 -m memprof) stands
if [ -d /tmp/site/bin ]; then
    sed "1s|.*|#!$(command -v python3)|" scripts/memprof >/tmp/site/bin/memprof
    chmod +x /tmp/site/bin/memprof
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | tr 'A-Z' 'a-z')
case $gpu in *h100*) prefix=h100 ;; *) prefix=h200 ;; esac

step() {  # step NAME COMMAND...: run it, its output in $OUT/NAME.log
    local name=$1
    shift
    echo "== $name: $*" | tee -a "$OUT/steps.log"
    local start=$SECONDS
    "$@" >"$OUT/$name.log" 2>&1
    local code=$?
    echo "   exit $code after $((SECONDS - start)) s" | tee -a "$OUT/steps.log"
    [ "$code" -ne 0 ] && status=1
    tail -n 4 "$OUT/$name.log" | sed 's/^/   | /'
}

for name in "$@"; do
    case $name in
    gpu-tests) step gpu-tests python3 -m pytest -m gpu -q -rs -p no:cacheprovider tests/gpu ;;
    fixtures)
        if [ "$prefix" = h100 ]; then
            step fixtures env OUT="$OUT/fixtures" bash tools/record_fixtures.sh h100 check
        else
            step fixtures env OUT="$OUT/fixtures" bash tools/record_fixtures.sh h200
        fi ;;
    fixture-diff) step fixture-diff env OUT="$OUT/fixture-diff" BASELINE="$BASELINE" \
        bash benchmarks/fixture_diff.sh ;;
    checks)
        for run in 1 2 3; do
            step "check-$run" python3 -m memprof check --retries 2 \
                --json "$OUT/check-$run.json" --junit "$OUT/check-$run.xml"
        done ;;
    startup) step startup python3 benchmarks/startup.py --runs 7 ;;
    report-scale) step report-scale python3 benchmarks/report_scale.py ;;
    budgets)
        if [ -n "$BASELINE" ]; then
            step budgets python3 benchmarks/budgets.py --runs "${RUNS:-1}" --baseline "$BASELINE"
        else
            step budgets python3 benchmarks/budgets.py --runs "${RUNS:-1}"
        fi ;;
    noise) step noise python3 benchmarks/noise.py --repeat "${REPEAT:-100}" ;;
    fidelity) step fidelity python3 benchmarks/fidelity.py ;;
    trace-overhead) step trace-overhead python3 benchmarks/trace_overhead.py ;;
    small-copies) step small-copies python3 benchmarks/allocators_and_small_copies.py \
        --out "$OUT/small-copies" ;;
    profile)
        for command in ${PROFILE:-compare sweep alloc managed}; do
            step "profile-$command" python3 benchmarks/wall_profile.py --top 45 -- \
                "$command" --quiet
        done
        step startup-profile python3 benchmarks/startup.py --runs 3 \
            --profile "$OUT/startup-profile" ;;
    *)
        echo "no step named $name" | tee -a "$OUT/steps.log"
        status=1 ;;
    esac
done
exit $status
