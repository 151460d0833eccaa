"""Policies written by users: a JAX function of one machine's `Terms` (and optional parameters)
registered with `policy`, then evaluated exactly like the 21 built-ins (docs/policies.md).

A score is `fn(t)` or `fn(t, params)`: `t` is a `jaxsched.Terms` of one task on one machine
(the stable interface the built-ins use), `params` a dict of named float32 scalars or 1-D
arrays. It returns one float32 score to maximize; infeasible machines are masked for it.
A row's parameters are the first entries of its genome, so parameterized policies vmap over
rows (a population, a sweep) as the family does.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import os
import sys
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .errors import InputError
from .policies import (FAMILY, REGISTRY, USER_POLICIES, Policy, Terms, get_policy, machine_terms, safe_inverse,
                       slot_vector)

USER_FAMILY = "user"


def _flatten(params: dict[str, Any] | None) -> tuple[list[str], list[float], list[tuple[int, tuple[int, ...]]]]:
    """(flat names, flat values, per-key (offset, shape)) of a dict of scalars and 1-D arrays."""
    names, values, layout = [], [], []
    for key, v in (params or {}).items():
        a = np.asarray(v, np.float64)
        if a.ndim > 1:
            raise InputError(f"parameter {key!r}: a scalar or a 1-D array, got shape {a.shape}")
        layout.append((len(values), a.shape))
        flat = a.reshape(-1)
        names += [key] if a.ndim == 0 else [f"{key}[{i}]" for i in range(flat.size)]
        values += [float(x) for x in flat]
    return names, values, layout


def _bounds(names: list[str], keys: list[str], layout, bounds: dict[str, Any] | None) -> tuple:
    """(low, high) per flat parameter: a key's bounds apply to each of its entries; default unbounded."""
    out = [(-math.inf, math.inf)] * len(names)
    for key, b in (bounds or {}).items():
        if key not in keys:
            raise InputError(f"bounds name {key!r}, which is not a parameter ({', '.join(keys) or 'none'})")
        lo, hi = (float(x) for x in b)
        if not lo <= hi:
            raise InputError(f"bounds of {key!r}: expected low <= high, got ({lo}, {hi})")
        off, shape = layout[keys.index(key)]
        for i in range(off, off + (int(np.prod(shape)) if shape else 1)):
            out[i] = (lo, hi)
    return tuple(out)


def _wrap(fn: Callable, keys: list[str], layout) -> Callable:
    if not keys:
        return lambda t, g: fn(t)

    def score(t: Terms, g):
        params = {k: (g[off] if not shape else g[off:off + shape[0]]) for k, (off, shape) in zip(keys, layout)}
        return fn(t, params)
    return score


def _takes_params(fn: Callable) -> bool:
    """Whether fn takes a second positional argument without a default (the parameters)."""
    try:
        args = list(inspect.signature(fn).parameters.values())[1:]
    except (TypeError, ValueError):
        return False
    return any(a.default is inspect.Parameter.empty and a.kind in (a.POSITIONAL_ONLY, a.POSITIONAL_OR_KEYWORD)
               for a in args)


def policy(name: str | Callable | None = None, *, params: dict[str, Any] | None = None,
           bounds: dict[str, Any] | None = None, deterministic: bool = True):
    """Register a user scoring function as a policy; usable as a decorator (`@jaxsched.policy`,
    `@jaxsched.policy("name", params=...)`) or a call (`jaxsched.policy("name")(fn)`).

    Args:
        name: the policy's name (default: the function's); not one of the built-ins.
        params: the default parameters, a dict of scalars or 1-D arrays (the function then
            takes `(t, params)`).
        bounds: (low, high) per parameter name, the search box of `evolve` and `tune`.
        deterministic: False for a score that reads `t.noise`.

    Returns:
        The decorator; it returns the function unchanged after registering it.

    Raises:
        InputError: a built-in's name, malformed parameters or bounds, or a function whose
            arity disagrees with `params`.
    """
    if callable(name):
        return policy()(name)

    def register(fn: Callable) -> Callable:
        pname = name or fn.__name__
        if pname in REGISTRY or pname == FAMILY.name:
            raise InputError(f"policy {pname!r}: the name of a built-in policy")
        names, values, layout = _flatten(params)
        keys = list((params or {}).keys())
        if bool(keys) != _takes_params(fn):
            raise InputError(f"policy {pname!r}: a function of (t, params) needs params=..., one of (t) none "
                             f"(it declares {len(keys)} parameters)")
        if not all(math.isfinite(v) for v in values):
            raise InputError(f"policy {pname!r}: parameters must be finite numbers")
        USER_POLICIES[pname] = Policy(pname, USER_FAMILY, _wrap(fn, keys, layout), deterministic=deterministic,
                                      params=tuple(values), param_names=tuple(names),
                                      bounds=_bounds(names, keys, layout, bounds))
        USER_POLICIES[pname].score.__doc__ = fn.__doc__
        return fn
    return register


def with_params(name: str, values: dict[str, Any]) -> Policy:
    """Set the parameters of the user policy `name` (a dict naming some or all of them; a
    1-D parameter takes a list) and return its updated registration.

    Raises:
        InputError: an unknown policy or parameter, or a value of the wrong size.
    """
    p = get_user_policy(name)
    flat = list(p.params)
    for key, v in values.items():
        idx = [i for i, n in enumerate(p.param_names) if n == key or n.startswith(f"{key}[")]
        if not idx:
            raise InputError(f"policy {name!r} has no parameter {key!r} (it has: "
                             f"{', '.join(dict.fromkeys(n.split('[')[0] for n in p.param_names)) or 'none'})")
        a = np.asarray(v, np.float64).reshape(-1)
        if a.size != len(idx) or not np.all(np.isfinite(a)):
            raise InputError(f"policy {name!r}, parameter {key!r}: expected {len(idx)} finite number(s), got {v!r}")
        for i, x in zip(idx, a):
            flat[i] = float(x)
    USER_POLICIES[name] = p._replace(params=tuple(flat))
    return USER_POLICIES[name]


def get_user_policy(name: str) -> Policy:
    """The user policy registered as `name`.

    Raises:
        InputError: no user policy of that name.
    """
    if name not in USER_POLICIES:
        raise InputError(f"no user policy {name!r} (registered: {', '.join(USER_POLICIES) or 'none'})")
    return USER_POLICIES[name]


def load_policy_file(path: str) -> tuple[str, ...]:
    """Import the Python file `path` and return the names of the policies it registered.

    Raises:
        InputError: no such file, an error while importing it, or no policy registered by it.
    """
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such policy file")
    before = dict(USER_POLICIES)
    module_name = f"jaxsched_user_policies_{abs(hash(os.path.abspath(path)))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise InputError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except InputError as e:
        raise InputError(f"{path}: {e}") from None
    except Exception as e:  # the user's code: report where, without our traceback
        tb = e.__traceback__
        line = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == os.path.abspath(path) or tb.tb_frame.f_code.co_filename == path:
                line = tb.tb_lineno
            tb = tb.tb_next
        raise InputError(f"{path}{f', line {line}' if line else ''}: {type(e).__name__}: {e}") from None
    added = tuple(n for n in USER_POLICIES if n not in before or USER_POLICIES[n] is not before[n])
    if not added:
        raise InputError(f"{path}: registers no policy (decorate a scoring function with @jaxsched.policy)")
    return added


def _sample(cluster, workload, slot, machines: int = 64, tasks: int = 8):
    """Terms of a few tasks on a few machines of this instance, free at capacity and at a fifth of it."""
    cap = np.asarray(cluster.capacity, np.float32)
    dem = np.asarray(workload.demand, np.float32)
    mi = np.linspace(0, cap.shape[0] - 1, min(machines, cap.shape[0])).astype(int)
    ti = np.linspace(0, dem.shape[0] - 1, min(tasks, dem.shape[0])).astype(int) if dem.shape[0] else []
    c = np.concatenate([cap[mi], cap[mi]])
    f = np.concatenate([cap[mi], 0.2 * cap[mi] + 0.5 * dem[ti[0]] if len(ti) else cap[mi]])
    return c, f, dem[ti] if len(ti) else np.full((1, cap.shape[1]), 0.01, np.float32), slot


def check_policy(name: str, cluster, workload, slot=None, genome=None) -> None:
    """Evaluate the policy `name` on a few machines and tasks of this instance and raise a clear
    error, before any packing, if it is not traceable, returns anything but one float32 score
    per machine, or gives NaN on a feasible machine. Built-ins pass without a check.

    Raises:
        InputError: naming the policy and the fault.
    """
    if name not in USER_POLICIES:
        return
    p = USER_POLICIES[name]
    R = cluster.num_resources
    slot = slot_vector(slot, R)
    g = jnp.asarray(p.params if genome is None else genome, jnp.float32).reshape(-1)
    scalar = lambda: jnp.zeros((), jnp.float32)
    one = tuple(scalar() for _ in range(R))
    terms = Terms(d=one, f=one, ic=one, r=one, rho=one, u=one, u0=one, a=scalar(), b=scalar(), fit=scalar(),
                  slots_f=scalar(), slots_r=scalar(), noise=scalar(), slot=slot)
    try:
        out = jax.eval_shape(lambda t, gg: p.score(t, gg), terms, g if g.size else jnp.zeros(1, jnp.float32))
    except Exception as e:  # the user's function: name it, say what JAX said in a line
        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise InputError(f"policy {name!r} is not traceable by JAX ({type(e).__name__}: {msg}); use jnp "
                         f"functions and jnp.where instead of Python if/float() on the terms") from None
    if not hasattr(out, "shape") or out.shape != ():
        raise InputError(f"policy {name!r} must return one score per machine (a scalar), got shape "
                         f"{getattr(out, 'shape', type(out).__name__)}")
    if out.dtype != jnp.float32:
        raise InputError(f"policy {name!r} must return float32 scores, got {out.dtype} "
                         f"(cast with .astype(jnp.float32))")
    cap, free, dem, slot = _sample(cluster, workload, slot)
    inv = safe_inverse(jnp.asarray(cap.T))
    gg = g if g.size else jnp.zeros(1, jnp.float32)

    def per_task(d):
        dd = tuple(d[x] for x in range(R))

        def machine(f, ic):
            t = machine_terms(dd, tuple(f[x] for x in range(R)), tuple(ic[x] for x in range(R)),
                              jnp.float32(0.5), slot)
            return p.score(t, gg), jnp.all(d <= f + 1e-6)
        return jax.vmap(machine, in_axes=(0, 1))(jnp.asarray(free), inv)

    s, fits = jax.jit(jax.vmap(per_task))(jnp.asarray(dem))
    s, fits = np.asarray(s), np.asarray(fits)
    if np.any(np.isnan(s) & fits):
        raise InputError(f"policy {name!r} gives NaN scores on feasible machines of this instance "
                         f"({int(np.sum(np.isnan(s) & fits))} of {int(fits.sum())} sampled): guard its "
                         f"divisions and logs (jnp.where, the clamped t.a and t.b)")


def check_policies(names, cluster, workload, slot=None) -> None:
    """`check_policy` for each of `names` (the user policies among them)."""
    for name in dict.fromkeys(names):
        get_policy(name)
        check_policy(name, cluster, workload, slot)


__all__ = ["USER_POLICIES", "check_policies", "check_policy", "get_user_policy", "load_policy_file", "policy",
           "with_params"]
