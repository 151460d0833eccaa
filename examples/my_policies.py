"""Two user policies for jaxsched: a hand-written heuristic and a parameterized one.

    jaxsched snapshot --policy-file examples/my_policies.py --policy cpu_first,weighted_fit,best_fit
    jaxsched snapshot --policy-file examples/my_policies.py --policy weighted_fit \
        --policy-params examples/weighted_fit.toml

Each function scores ONE task on ONE machine from its `jaxsched.Terms` (t.d demand, t.f free,
t.r residual, t.rho normalized residual, t.u and t.u0 utilization after and before, t.a and
t.b the clamped CPU and memory ratios, t.fit = sum of t.u, ...; tuples have one entry per
resource dimension). The highest score wins; infeasible machines are masked before.
"""

import jax.numpy as jnp

import jaxsched


@jaxsched.policy
def cpu_first(t):
    """Pack CPU tightest, then memory: the machine left with the least CPU, ties to the least memory."""
    return 1.0 - t.rho[0] - 1e-3 * t.rho[1]


@jaxsched.policy(params={"w": [1.0, 1.0], "balance": 0.5}, bounds={"w": (0.0, 4.0), "balance": (0.0, 4.0)})
def weighted_fit(t, p):
    """Weighted utilization after placement, minus a penalty on unbalanced residual CPU and memory."""
    return p["w"][0] * t.u[0] + p["w"][1] * t.u[1] - p["balance"] * jnp.abs(t.rho[0] - t.rho[1])
