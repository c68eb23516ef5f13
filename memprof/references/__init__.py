"""Reference results of `memprof check`, one per GPU model, recorded on known-good machines.

Each file is the `--json` of `memprof check` (a Result, loaded with the same checks as any
saved file), matched to a run by the GPU's name as the driver reports it ("NVIDIA H200").
Its figures become expectations beside the theoretical ones: a figure under 90% of the
reference's, at the same size, is a WARN. To add one, on a healthy machine with nothing else
running:  memprof check --json memprof/references/<model>.json  (docs/check.md).
"""
