#!/usr/bin/env bash
# Record the test fixtures on the GPU machine: one `memprof CMD --json` per fixture, as a user
# runs it (a fixed count only where a test needs one). From the repository root:
#
#     OUT=/some/dir bash tools/record_fixtures.sh h200           # every one-GPU fixture
#     OUT=/some/dir bash tools/record_fixtures.sh h100 sweep     # some, by name after PREFIX_
#     CHECKOUT=../older OUT=/some/dir bash tools/record_fixtures.sh h200 sweep
#     bash tools/record_fixtures.sh --names                     # the fixtures' names
#
# CHECKOUT: another memprof to record with, run from its folder (the traced examples are this
# checkout's). $OUT gets PREFIX_NAME.json and .log, and recorded.log (exit codes, wall times);
# the exit status is 1 if any failed. Copy the files into tests/fixtures/, then run
# tools/golden.py and tools/docblocks.py and read the differences (docs/adding-an-experiment.md).
set -u
ROOT=$PWD
CHECKOUT=$(cd "${CHECKOUT:-.}" && pwd)
OUT=${OUT:-fixtures-out}
PREFIX=${1:?which GPU: h200 or h100}
shift
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
status=0

declare -A ARGS=(  # the command of each fixture whose command is not its name alone
    [pinned_p20]="pinned --power 20 --repeat 10"
    [pinned_p20_events]="pinned --power 20 --repeat 10 --timing events"
    [zerocopy_p20]="zerocopy --power 20 --repeat 10"
    [zerocopy_sweep]="zerocopy"
    [trace_pycuda]="trace examples/pycuda_copies.py"
    [trace_torch]="trace examples/torch_copies.py"
    [trace_managed]="trace examples/managed_touch.py"
)
ORDER=(info check pinned_p20 pinned_p20_events zerocopy_p20 zerocopy_sweep uva managed
    writecombined register pinlimit alloc streams device compare sweep smallcopies trace_pycuda
    trace_torch trace_managed)
[ "$PREFIX" = --names ] && { echo "${ORDER[*]}"; exit 0; }  # in order, for fixture_diff.sh
NAMES=("$@")
[ ${#NAMES[@]} -eq 0 ] && NAMES=("${ORDER[@]}")

for name in "${NAMES[@]}"; do
    if [[ $name = *" "* || " ${ORDER[*]} " != *" $name "* ]]; then  # not one of ORDER
        echo "no fixture named $name (names: ${ORDER[*]})" | tee -a "$OUT/recorded.log"
        status=1
        continue
    fi
    args=${ARGS[$name]:-$name}
    read -r -a words <<<"${args//examples\//$ROOT/examples/}"
    target="$OUT/${PREFIX}_$name.json"
    start=$SECONDS
    # the --json option goes before a traced program's own arguments
    (cd "$CHECKOUT" && PYTHONPATH="$CHECKOUT${PYTHONPATH:+:$PYTHONPATH}" \
        python3 -m memprof "${words[0]}" --json "$target" "${words[@]:1}") >"${target%.json}.log" 2>&1
    code=$?
    echo "${PREFIX}_$name: memprof $args: exit $code after $((SECONDS - start)) s" \
        | tee -a "$OUT/recorded.log"
    # check exits 1 on a FAIL line: the run itself was recorded
    if [ "$code" -ne 0 ] && ! { [ "$code" -eq 1 ] && [ -f "$target" ]; }; then
        status=1
    fi
done
exit $status
