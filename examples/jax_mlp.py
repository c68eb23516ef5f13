"""A JAX program: a small MLP trained a few steps on batches made in numpy, as the H200 trace
whose saved file memprof's own loader refused (XLA's host-to-host copies blocked the host and
were counted two ways). It prints what it did:

    memprof-example: {"program": "jax_mlp", "backend": "gpu", "steps": 20, "correct": true}

tests/gpu/test_trace.py traces it where jax is installed and loads the saved file.
Usage: XLA_PYTHON_CLIENT_PREALLOCATE=false python examples/jax_mlp.py [STEPS]
(bare or under `memprof trace`; without the variable XLA takes most of the GPU's memory).
"""

from __future__ import annotations

import json
import math
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # read when jax starts

import jax
import jax.numpy as jnp
import numpy as np

FEATURES, HIDDEN, CLASSES, BATCH = 256, 512, 10, 128


def loss(params: dict, x: jax.Array, y: jax.Array) -> jax.Array:
    hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
    logits = hidden @ params["w2"] + params["b2"]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * y, axis=1))


@jax.jit
def step(params: dict, x: jax.Array, y: jax.Array) -> tuple[dict, jax.Array]:
    value, grads = jax.value_and_grad(loss)(params, x, y)
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, grads), value


def main(steps: int) -> None:
    first, second = jax.random.split(jax.random.PRNGKey(0))
    params = {
        "w1": jax.random.normal(first, (FEATURES, HIDDEN)) * 0.05,
        "b1": jnp.zeros(HIDDEN),
        "w2": jax.random.normal(second, (HIDDEN, CLASSES)) * 0.05,
        "b2": jnp.zeros(CLASSES),
    }
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x = rng.standard_normal((BATCH, FEATURES), dtype=np.float32)  # fed from numpy
        y = np.eye(CLASSES, dtype=np.float32)[rng.integers(0, CLASSES, BATCH)]
        params, value = step(params, x, y)
        losses.append(float(value))  # back to the host every step
    report = {
        "program": "jax_mlp",
        "backend": jax.default_backend(),
        "steps": steps,
        "correct": all(math.isfinite(v) for v in losses),
    }
    print("memprof-example: " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
