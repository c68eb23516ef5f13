#!/usr/bin/env bash
# The mutation score of the code that decides what a user reads: every verdict, threshold and
# crossover (each experiment's conclusions, memprof check), the ceilings, NVML's GPU state,
# verification and statistics, and the loader's generic refusals (figures, measures, a run's
# records held against each other) (issue 22). tools/mutate.py plants one small bug at a time and
# runs the CPU tests that reach its line; the suite runs once first to learn which those are.
#
#   benchmarks/mutation.sh                 # every module below, one child at a time
#   benchmarks/mutation.sh --show-killed   # more tools/mutate.py options pass through
#
# On a 2-core machine it takes about an hour; never run two at once. The suite's coverage is
# kept in $MUTATION_COVERAGE (reused while no .py file under memprof/ or tests/ changes), so
# a second run, or a run over one module with the same --coverage, starts at once.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
COVERAGE=${MUTATION_COVERAGE:-${TMPDIR:-/tmp}/memprof-mutation-coverage.json}

MODULES=(
  memprof/experiments/check.py:judge,figure,_throughput_line,link_line,_unknown,clocks_line,processes_line,lines,_at_once_line,reference_for,failures,tally,summarize,peer_figures,pair_lines,summarize_pairs
  memprof/model/ceilings.py
  memprof/model/gpustate.py
  memprof/core/nvml.py:_state,seen_reasons,others
  memprof/core/verify.py
  memprof/model/statistics.py
  memprof/experiments/common.py:stops_at,figures_by_key,largest_batch,gpu_timing
  memprof/model/figures.py
  memprof/model/measures.py
  memprof/experiments/base.py:check_result,_check_noise_target,check_gpu_states,_check_link_against_facts,_check_kinds_the_gpu_has
  memprof/experiments/pinned.py:summarize,_transfers,_conclusion
  memprof/experiments/zerocopy.py:summarize,_conclusions,_pageable_conclusion
  memprof/experiments/uva.py:summarize
  memprof/experiments/managed.py:summarize,_conclusion
  memprof/experiments/writecombined.py:summarize
  memprof/experiments/register.py:summarize
  memprof/experiments/alloc.py:_cheapest_and_dearest
  memprof/experiments/pools.py:steady_ms,pays_from,loop_verdict,_pool_conclusion,_growth_conclusion
  memprof/experiments/streams.py:summarize,stage_times,ideal_overlapped_ms,_median_run
  memprof/experiments/device.py:summarize
  memprof/experiments/compare.py:summarize,recommendations,sentence
  memprof/experiments/sweep.py:summarize,crossovers,_ninety_percent_size
  memprof/experiments/smallcopies.py:cost,per_copy_costs,stops_losing,_verdicts,_crossover
  memprof/experiments/peer.py:figures,latencies_us,_conclusions
  memprof/experiments/hostlink.py:totals,summarize,_conclusions
  memprof/experiments/portable.py:_conclusions
  memprof/experiments/trace.py:pageable_advice,small_copy_advice,measured_gain,blocking_advice,unified_memory_advice,advice
)

exec "$PYTHON" tools/mutate.py --jobs 1 --coverage "$COVERAGE" "${MODULES[@]}" "$@"
