#!/usr/bin/env bash
# Has a change moved any figure? Each fixture's command (tools/record_fixtures.sh) recorded by
# an older memprof (BASELINE: A), by this one (B) and by this one again (B'), one after another
# per command; then `memprof diff --fail-above 10` A -> B and B -> B': the second, what two runs
# of the same code move on this machine, is the yardstick for the first (issue 24). From the
# repository root, on the GPU machine:
#
#     BASELINE=../memprof-before OUT=/some/dir bash benchmarks/fixture_diff.sh [NAME...]
#     PREFIX=h100 OUT=/some/dir bash benchmarks/fixture_diff.sh --summary-only   # anywhere
#
# $OUT/{a,b,b2}/ hold the recordings, $OUT/diff/ each diff, summary.txt one line per fixture.
# --summary-only diffs earlier recordings (PREFIX: their GPU). Exit 1 if any run failed.
set -u
OUT=${OUT:-fixture-diff}
mkdir -p "$OUT/diff"
summary_only=0
[ "${1:-}" = --summary-only ] && summary_only=1 && shift
if [ -n "${PREFIX:-}" ]; then
    prefix=$PREFIX
else
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader -i 0 2>/dev/null | tr 'A-Z' 'a-z')
    case $gpu in *h100*) prefix=h100 ;; *) prefix=h200 ;; esac
fi
names=("$@")
[ ${#names[@]} -eq 0 ] && read -r -a names <<<"$(bash tools/record_fixtures.sh --names)"
status=0
if [ "$summary_only" = 0 ]; then
    BASELINE=${BASELINE:?BASELINE: a checkout of the older memprof}
    for name in "${names[@]}"; do
        CHECKOUT=$BASELINE OUT=$OUT/a bash tools/record_fixtures.sh "$prefix" "$name" || status=1
        OUT=$OUT/b bash tools/record_fixtures.sh "$prefix" "$name" || status=1
        OUT=$OUT/b2 bash tools/record_fixtures.sh "$prefix" "$name" || status=1
    done
fi
for name in "${names[@]}"; do
    file=${prefix}_$name.json
    for pair in ab:a:b bb:b:b2; do
        IFS=: read -r tag first second <<<"$pair"
        [ -f "$OUT/$first/$file" ] && [ -f "$OUT/$second/$file" ] || continue
        # exit 1: the gate failed a figure, which is what is counted here
        COLUMNS=120 python3 -m memprof diff --no-color --allow-not-comparable --fail-above 10 \
            --json "$OUT/diff/$name-$tag.json" "$OUT/$first/$file" "$OUT/$second/$file" \
            >"$OUT/diff/$name-$tag.txt" 2>&1
        code=$?
        # info's runs hold no measurement: nothing to compare, no failure
        if [ $code -gt 1 ] && ! grep -q "have no measurement in common" "$OUT/diff/$name-$tag.txt"; then
            status=1
        fi
    done
done
python3 - "$OUT/diff" "${names[@]}" <<'SUMMARY' | tee "$OUT/summary.txt" || status=1
import json, sys
from collections import Counter
from pathlib import Path

folder, names = Path(sys.argv[1]), sys.argv[2:]
def counts(path):
    """Figures, those beyond noise, those more than 10% slower beyond it, and "group G" each"""
    found = Counter()
    for table in json.loads(path.read_text())["tables"]:
        for row in table["rows"] if "Change" in table["headers"] else []:
            name, ratio, change = row[0], row[-2], row[-1]
            found["figures"] += 1
            if change in ("B slower", "B faster"):
                found["beyond"] += 1
                group = name.rsplit("[", 1)[-1].rstrip("]") if name.endswith("]") else "other"
                found[f"group {group}"] += 1
                found["slower"] += change == "B slower" and float(ratio.rstrip("x")) > 1.10
    return found
def cell(found):
    return "-" if found is None else f"{found['beyond']} of {found['figures']} ({found['slower']})"
print("figures beyond diff's noise (of those in both runs), and in brackets those more than")
print("10% slower, which `diff --fail-above 10` fails")
print(f"{'fixture':<20}{'A (baseline) -> B (this)':>26}{'B -> B' + chr(39) + ' (this, again)':>26}")
totals = {"ab": Counter(), "bb": Counter()}
for name in names:
    found = {}
    for tag in totals:
        path = folder / f"{name}-{tag}.json"
        found[tag] = counts(path) if path.exists() else None
        totals[tag] += found[tag] or Counter()
    print(f"{name:<20}{cell(found['ab']):>26}{cell(found['bb']):>26}")
print(f"{'all':<20}{cell(totals['ab']):>26}{cell(totals['bb']):>26}")
for tag, words in (("ab", "A -> B"), ("bb", "B -> B'")):
    groups = sorted((key[6:], n) for key, n in totals[tag].items() if key.startswith("group "))
    print(f"{words} beyond noise, by group: {', '.join(f'{group} {n}' for group, n in groups)}")
SUMMARY
exit $status
