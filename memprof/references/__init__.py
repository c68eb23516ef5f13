"""Reference results of `memprof check`, one per GPU model, recorded on known-good machines: each
is a check's --json, loaded as any saved file; how a run is matched to one, what it expects and how
to add one: docs/check.md, "Reference results"."""
