"""Issue 24's targets are the H200's; the H100 is allowed 1.3x them (its budgets, its ratio
to the floor). One place that says which allowance the GPU this runs on gets, for
budgets.py and startup.py (run from benchmarks/, which puts this folder on the path)."""

from __future__ import annotations

import subprocess

ALLOWANCE = {"H200": 1.0, "H100": 1.3}  # by the model in the GPU's name


def allowance(gpu_name: str) -> float:
    """What the H200's targets are multiplied by on this GPU: 1.0 where the issue names no
    allowance (another GPU is held to the H200's targets)."""
    for model, factor in ALLOWANCE.items():
        if model in gpu_name:
            return factor
    return 1.0


def gpu_name() -> str:
    """GPU 0's name as nvidia-smi gives it; "" where there is none."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def verdict(value: float, h200_target: float, factor: float) -> str:
    """'met' where value is within the target times this GPU's allowance, else 'MISSED'."""
    return "met" if value <= h200_target * factor else "MISSED"
