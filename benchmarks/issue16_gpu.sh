#!/usr/bin/env bash
# Issue 16 on the GPU machines: the GPU state from NVML, every figure against its ceiling,
# memprof check (and check-pairs), and the recordings the CPU tests and docs wait for.
#
#   bash benchmarks/issue16_gpu.sh h200     # one H200
#   bash benchmarks/issue16_gpu.sh h100     # one H100
#   bash benchmarks/issue16_gpu.sh h200x2   # two H200s linked by NVLink
#
# Everything lands under $OUT (default ./issue16-out): each step's output as NAME.txt (at 80
# columns), its Result as NAME.json where it makes one, and steps.txt with every step's exit
# status and wall time. A step that fails does not stop the others.
set -u
KIND=${1:?usage: issue16_gpu.sh h200|h100|h200x2}
OUT=${OUT:-./issue16-out}
mkdir -p "$OUT"
export COLUMNS=80
: > "$OUT/steps.txt"

step() {  # step NAME COMMAND...: run it, keep its output and its exit status
  local name=$1; shift
  local start=$SECONDS
  echo "== $name: $*" | tee -a "$OUT/steps.txt"
  "$@" > "$OUT/$name.txt" 2>&1
  local status=$?
  echo "   exit $status, $((SECONDS - start)) s" | tee -a "$OUT/steps.txt"
  tail -n 25 "$OUT/$name.txt"
}

step versions python -c "import pynvml, memprof; print('nvidia-ml-py', pynvml.__file__); print('memprof', memprof.__file__)"
step nvidia_smi nvidia-smi -q  # NVML's own view, to compare with memprof info
step cpu_tests python -m pytest -q tests/test_nvml.py tests/test_gpu_state.py tests/test_ceilings.py \
  tests/test_check.py tests/test_diff_comparable.py tests/test_golden.py
step gpu_tests python -m pytest -m gpu -q -s tests/gpu/test_gpu_state_and_check.py

# The GPU state: info's rows, and every run's header.
step info python -m memprof info --json "$OUT/info.json"

# memprof check: every line PASS on a healthy, idle machine, in at most 20 s (the wall time
# is in steps.txt). Its --json is the reference the package ships for this GPU model.
step check python -m memprof check --json "$OUT/check.json"
cp "$OUT/check.json" "$OUT/reference_$KIND.json"

# A slow run: check beside a second process copying on the same GPU. Expected: the copy
# lines WARN or FAIL, 'No other process on the GPU' WARNs, exit 1 on a FAIL.
python benchmarks/copy_load.py 0 25 > "$OUT/copy_load.txt" 2>&1 &
LOAD=$!
sleep 4
step check_beside_load python -m memprof check --json "$OUT/check_beside_load.json"
kill "$LOAD" 2>/dev/null; wait "$LOAD" 2>/dev/null

# The pageable ceiling explains the runs: three runs of pinned --power 20, each pageable
# figure 50-100% of the host memcpy measured in the same run.
for i in 1 2 3; do
  step "pinned_$i" python -m memprof pinned --power 20 --json "$OUT/pinned_$i.json"
done
step pageable_ceiling python benchmarks/pageable_ceiling.py "$OUT"/pinned_1.json \
  "$OUT"/pinned_2.json "$OUT"/pinned_3.json
step diff_pinned python -m memprof diff "$OUT/pinned_1.json" "$OUT/pinned_2.json"

# Every other command's ceilings, recorded for the fixtures and docs.
step sweep python -m memprof sweep --json "$OUT/sweep.json"
step compare python -m memprof compare --json "$OUT/compare.json"
step zerocopy python -m memprof zerocopy --power 20 --json "$OUT/zerocopy_p20.json"
step register python -m memprof register --json "$OUT/register.json"
step writecombined python -m memprof writecombined --json "$OUT/writecombined.json"
step streams python -m memprof streams --json "$OUT/streams.json"
step device python -m memprof device --json "$OUT/device.json"
step nvml_overhead python benchmarks/nvml_overhead.py

if [ "$KIND" = h200x2 ]; then
  step nvlink_status nvidia-smi nvlink -s
  step topology nvidia-smi topo -m
  step info_1 python -m memprof info --device 1 --json "$OUT/info_1.json"
  step check_all python -m memprof check --device all
  step check_pairs python -m memprof check-pairs --json "$OUT/check_pairs.json"
  step peer python -m memprof peer --json "$OUT/peer.json"
  step hostlink python -m memprof hostlink --json "$OUT/hostlink.json"
  step portable python -m memprof portable --json "$OUT/portable.json"
fi
echo "done: $OUT" | tee -a "$OUT/steps.txt"
