#!/usr/bin/env bash
# Has a change moved any figure? Each fixture's command (tools/record_fixtures.sh) recorded on
# this GPU by an older memprof (BASELINE: A), by this one (B) and by this one again (B'), the
# three one after another per command; then `memprof diff` A -> B and B -> B'. The second
# says how many figures two runs of the same code move beyond their own noise on this
# machine, the yardstick for the first (issue 24: every re-recorded fixture diffed against
# today's, no figure moved beyond noise). Run from the repository root, on the GPU machine:
#
#     BASELINE=../memprof-before OUT=/some/dir bash benchmarks/fixture_diff.sh [NAME...]
#
# $OUT/{a,b,b2}/ hold the recordings, $OUT/diff/NAME-{ab,bb}.txt each diff, summary.txt one
# line per fixture. The exit status is 1 if a recording or a diff failed.
set -u
BASELINE=${BASELINE:?BASELINE: a checkout of the older memprof}
OUT=${OUT:-fixture-diff}
mkdir -p "$OUT/diff"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | tr 'A-Z' 'a-z')
case $gpu in *h100*) prefix=h100 ;; *) prefix=h200 ;; esac
names=("$@")
[ ${#names[@]} -eq 0 ] && read -r -a names <<<"$(bash tools/record_fixtures.sh --names)"
status=0
for name in "${names[@]}"; do
    CHECKOUT=$BASELINE OUT=$OUT/a bash tools/record_fixtures.sh "$prefix" "$name" || status=1
    OUT=$OUT/b bash tools/record_fixtures.sh "$prefix" "$name" || status=1
    OUT=$OUT/b2 bash tools/record_fixtures.sh "$prefix" "$name" || status=1
done
# "N measurements in both runs: B was faster in F, slower in S, and within noise in W."
counts() { sed -n 's/.*\([0-9][0-9]*\) measurements\{0,1\} in both runs: B was faster in \([0-9]*\), slower in \([0-9]*\), and within noise in \([0-9]*\).*/\2 faster, \3 slower, \4 within/p' "$1" | head -1; }
{
    printf '%-22s %-34s %s\n' fixture "A (baseline) -> B (this)" "B -> B' (this, again)"
    for name in "${names[@]}"; do
        file=${prefix}_$name.json
        for pair in ab:a:b bb:b:b2; do
            IFS=: read -r tag first second <<<"$pair"
            COLUMNS=120 python3 -m memprof diff --no-color --allow-not-comparable "$OUT/$first/$file" "$OUT/$second/$file" \
                >"$OUT/diff/$name-$tag.txt" 2>&1 || status=1
        done
        printf '%-22s %-34s %s\n' "$name" "$(counts "$OUT/diff/$name-ab.txt")" \
            "$(counts "$OUT/diff/$name-bb.txt")"
    done
} | tee "$OUT/summary.txt"
exit $status
