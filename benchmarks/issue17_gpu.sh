#!/usr/bin/env bash
# Everything issue 17 (pools, virtual memory, small copies) needs from the GPU machine, in one
# go: about five minutes on the H200. Run from the repository root:
#
#     OUT=/some/dir bash benchmarks/issue17_gpu.sh            # every step
#     OUT=/some/dir bash benchmarks/issue17_gpu.sh benchmark  # some steps, by name
#
# Steps: gpu-tests, benchmark, alloc, smallcopies, compare, trace. Each writes $OUT/STEP.log;
# Results are saved as $OUT/h200_*.json with their `memprof report` at 100 columns beside
# (*.100.txt) for the docs; steps.log says each step's exit code and wall time. A step that
# fails does not stop the others; the exit status is 1 if any failed.
set -u
OUT=${OUT:-issue17-out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
STEPS=("$@")
[ ${#STEPS[@]} -eq 0 ] && STEPS=(gpu-tests benchmark alloc smallcopies compare trace)
status=0

step() {  # step NAME COMMAND...: run it, its output in $OUT/NAME.log
    local name=$1
    shift
    echo "== $name: $*" | tee -a "$OUT/steps.log"
    local start=$SECONDS
    "$@" >"$OUT/$name.log" 2>&1
    local code=$?
    echo "   exit $code after $((SECONDS - start)) s" | tee -a "$OUT/steps.log"
    [ "$code" -ne 0 ] && status=1
    tail -n 5 "$OUT/$name.log" | sed 's/^/   | /'
}

report() {  # report FILE.json: its rendering at 100 columns, for the docs
    [ -f "$1" ] && COLUMNS=100 python -m memprof report "$1" >"${1%.json}.100.txt" 2>&1
}

for name in "${STEPS[@]}"; do
    case $name in
    gpu-tests)
        step gpu-tests python -m pytest -m gpu tests/gpu/test_allocators_and_small_copies.py -q -rs ;;
    benchmark)
        step benchmark python benchmarks/allocators_and_small_copies.py --out "$OUT/benchmark" ;;
    alloc)
        step alloc python -m memprof alloc --json "$OUT/h200_alloc.json"
        report "$OUT/h200_alloc.json" ;;
    smallcopies)
        step smallcopies python -m memprof smallcopies --json "$OUT/h200_smallcopies.json"
        report "$OUT/h200_smallcopies.json" ;;
    compare)
        step compare python -m memprof compare --json "$OUT/h200_compare.json"
        report "$OUT/h200_compare.json" ;;
    trace)
        cat >"$OUT/small_copies_program.py" <<'PROGRAM'
# 104 pageable copies of 16 KiB host to device, as a ResNet-18 training step makes.
import numpy as np
import pycuda.autoinit  # noqa: F401
import pycuda.driver as cuda

pieces = [np.full(4096, i, np.float32) for i in range(104)]
device = cuda.mem_alloc(16384)
for piece in pieces:
    cuda.memcpy_htod(device, piece)
PROGRAM
        rm -rf "$OUT/cache"  # measured now, then cached: the second trace reads the cache
        for run in first second; do
            step "trace-$run" env XDG_CACHE_HOME="$OUT/cache" python -m memprof trace \
                --json "$OUT/h200_trace_small_copies_$run.json" "$OUT/small_copies_program.py"
        done
        report "$OUT/h200_trace_small_copies_second.json" ;;
    *)
        echo "no step named $name (steps: gpu-tests benchmark alloc smallcopies compare trace)"
        status=1 ;;
    esac
done
exit $status
