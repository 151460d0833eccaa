"""The placement policies of docs/spec/POLICIES.md as pure JAX scoring functions.

Each policy is a function of one machine's terms (demand, free, capacity and what
the spec derives from them) returning a scalar score to maximize; `score_machines`
vmaps it over the machine axis and masks infeasible machines with -inf. Guards of
the spec: ratios a, b clamped to [1e-4, 1e4] (the upper clamp keeps powers finite
when free capacity is float-rounding small), rho of a zero-capacity dimension is 0,
residuals are clamped at 0 for scoring (a feasible residual is >= -1e-6 anyway).

Layout: inside the library, free and capacity are dimension-major, f32[R, M], so the
machine axis is contiguous; `score` is the public entry with the user layout [M, R].
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .errors import InputError

FEASIBILITY_TOL = 1e-6
EPS = 1e-3
RATIO_MIN = 1e-4
RATIO_MAX = 1e4
DEFAULT_SLOT = (0.05, 0.05)
GENOME_SIZE = 8
GENOME_NAMES = ("w0", "w1", "w2", "w3", "w4", "w5", "p1", "p2")
ALPHA_EVOLVE_GENOME = (1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0)
# The champion of `jaxsched evolve --config configs/evolve_google2011.toml --strategy cma_es` (CMA-ES,
# 20 generations x 64 genomes on the Google 2011 sample's peak snapshot); the run's record, with its
# train and held-out figures against alpha_evolve, is results/evolve_google2011_cma_es.json, and the
# comparison that replaced the (mu + lambda) champion of results/evolve_google2011.json is in
# docs/tuning.md.
EVO_SEARCH_GENOME = (0.32816994190216064, 0.40919214487075806, 0.2400878667831421, 0.6399112939834595,
                     -0.0423172190785408, -1.0, 0.25, 4.0)
_EVO_SEARCH = np.asarray(EVO_SEARCH_GENOME, np.float32)


def slot_vector(slot: tuple[float, ...] | None, num_resources: int) -> tuple[float, ...]:
    """The standard slot per dimension: the given one, or 0.05 on CPU and memory.

    A slot size of 0 leaves that dimension out of `slots` (default beyond the first two).
    """
    if slot is None:
        slot = DEFAULT_SLOT
    slot = tuple(float(s) for s in slot)
    if len(slot) > num_resources:
        raise InputError(f"slot has {len(slot)} entries for {num_resources} resource dimensions")
    slot = slot + (0.0,) * (num_resources - len(slot))
    if any(s < 0 for s in slot) or not any(s > 0 for s in slot):
        raise InputError(f"slot sizes must be >= 0 with at least one > 0, got {slot}")
    return slot


# Per-machine vectors are tuples of R scalars, one per resource dimension: vmapping a
# function of tuples over the machine axis keeps each dimension a contiguous [M] row,
# where an [R]-vector per machine would make XLA transpose to [M, R] every step.

def dmap(fn, *vecs):
    """Apply fn across resource dimensions of equal-length tuples."""
    return tuple(fn(*xs) for xs in zip(*vecs))


def dsum(v):
    """Sum over resource dimensions."""
    return functools.reduce(jnp.add, v)


def dmax(v):
    """Max over resource dimensions."""
    return functools.reduce(jnp.maximum, v)


def dall(v):
    """All over resource dimensions."""
    return functools.reduce(jnp.logical_and, v)


def slots(v, slot: tuple[float, ...]) -> jax.Array:
    """Whole standard slots that fit in v (a tuple of per-dimension values), float32-safe.

    A slot fits where s_x <= v_x + 1e-6, the feasibility rule, so k slots fit where
    k s_x <= v_x + 1e-6: slots = floor(min_x (v_x + 1e-6) / s_x) over dims with s_x > 0.
    """
    per_dim = [(vx + FEASIBILITY_TOL) / s for vx, s in zip(v, slot) if s > 0]
    return jnp.maximum(jnp.floor(functools.reduce(jnp.minimum, per_dim)), 0.0)


def columns(a: jax.Array) -> tuple[jax.Array, ...]:
    """Split the last axis of `a` into a tuple of per-dimension arrays."""
    return tuple(a[..., x] for x in range(a.shape[-1]))


class Terms(NamedTuple):
    """Everything a score may use, for one task on one machine (tuples: one entry per dim)."""

    d: tuple  # demand
    f: tuple  # free before placement
    ic: tuple  # 1 / capacity, 0 where capacity is 0 (the only way scores see capacity)
    r: tuple  # residual f - d, clamped at 0
    rho: tuple  # normalized residual r / c, 0 where c == 0
    u: tuple  # utilization after placement, 1 - rho
    u0: tuple  # utilization before placement, 1 - f / c
    a: jax.Array  # f32[] clamped d_cpu / f_cpu
    b: jax.Array  # f32[] clamped d_mem / f_mem
    fit: jax.Array  # f32[] best_fit score, sum of u
    slots_f: jax.Array  # f32[] slots(f)
    slots_r: jax.Array  # f32[] slots(r)
    noise: jax.Array  # f32[] the trial's uniform draw for this machine
    slot: tuple[float, ...]  # static standard slot
    cached: tuple = ()  # the policy's `Policy.cached` terms of this machine, where kept (else empty)


def _ratio(num, den):
    safe = jnp.where(den > 0, den, 1.0)
    raw = jnp.where(den > 0, num / safe, jnp.where(num > 0, RATIO_MAX, RATIO_MIN))
    return jnp.clip(raw, RATIO_MIN, RATIO_MAX)


def machine_terms(d, f, inv_c, noise, slot, cached=()) -> Terms:
    """The spec's derived quantities for one machine. inv_c = 1/c, 0 where c <= 0."""
    r = dmap(lambda fx, dx: jnp.maximum(fx - dx, 0.0), f, d)
    rho = dmap(jnp.multiply, r, inv_c)
    u = dmap(lambda x: 1.0 - x, rho)
    u0 = dmap(lambda fx, ix: 1.0 - jnp.maximum(fx, 0.0) * ix, f, inv_c)
    return Terms(
        d=d, f=f, ic=inv_c, r=r, rho=rho, u=u, u0=u0,
        a=_ratio(d[0], f[0]), b=_ratio(d[1], f[1]),
        fit=dsum(u), slots_f=slots(dmap(lambda x: jnp.maximum(x, 0.0), f), slot), slots_r=slots(r, slot),
        noise=noise, slot=slot, cached=cached,
    )


# Packing states hold this as the free capacity of a dimension of zero capacity (`encode_free`):
# then d_x <= f_x + 1e-6 alone refuses any positive demand there (-1e-6 + 1e-6 is exactly 0 in
# float32) and admits a zero one, and every score is unchanged (r, rho and u0 clamp or scale it to 0).
ZERO_CAPACITY_FREE = np.float32(-FEASIBILITY_TOL)


def encode_free(free, inv_c):
    """free capacity as packing states hold it: ZERO_CAPACITY_FREE where 1 / capacity is 0."""
    return jnp.where(inv_c > 0, free, ZERO_CAPACITY_FREE)


def feasible(d, f, inv_c=None):
    """Task fits: d_x <= f_x + 1e-6 everywhere, and never on a zero-capacity dimension it uses.

    inv_c None: f is encoded (`encode_free`), where the first test covers the second and no
    1 / capacity is read."""
    if inv_c is None:
        return dall(dmap(lambda dx, fx: dx <= fx + FEASIBILITY_TOL, d, f))
    return dall(dmap(lambda dx, fx, ix: (dx <= fx + FEASIBILITY_TOL) & ((ix > 0) | (dx <= 0)), d, f, inv_c))


def _cos(t: Terms):
    x = dmap(jnp.multiply, t.d, t.ic)
    y = dmap(jnp.multiply, t.f, t.ic)
    nx, ny = jnp.sqrt(dsum(dmap(jnp.square, x))), jnp.sqrt(dsum(dmap(jnp.square, y)))
    den = nx * ny
    return jnp.where(den > 0, dsum(dmap(jnp.multiply, x, y)) / jnp.where(den > 0, den, 1.0), 0.0)


LN10 = np.float32(np.log(10.0))


def _pow10(x):
    """10^x as exp(x ln 10), cheaper on CPU than XLA's general pow."""
    return jnp.exp(x * LN10)


def _pow_exp(x, logx, p):
    """x^p from log x, exact at the integer points the spec names (alpha_evolve is p = 1).

    exp(p log x) is cheaper than XLA's general pow on CPU, and x > 0 here.
    """
    return jnp.where(p == 1.0, x, jnp.where(p == 2.0, x * x, jnp.exp(p * logx)))


def family(t: Terms, g) -> jax.Array:
    """-(w0 a^p1 + w1 b^p1 + w2 (b/a)^p2 + w3 (a/b)^p2 + w4 (sum u) + w5 |rho_c - rho_m|).

    Exact (the same float32 operations as the named policy) at p1 = 1, p1 = 2 and p2 = 1,
    so that alpha_evolve is an exact point of the family; at p2 = 2 (ae_pow's point)
    (b/a)^2 is exp(2 (log b - log a)), within float32 rounding of ae_pow's (b/a)(b/a): an exact
    branch there would give b/a two uses, and XLA then splits the scoring into five passes.
    """
    a, b = t.a, t.b
    la, lb = jnp.log(a), jnp.log(b)  # a, b are clamped to [1e-4, 1e4]
    ba = jnp.exp(g[7] * (lb - la))  # (b/a)^p2; (a/b)^p2 is its inverse
    terms = (lambda: _pow_exp(a, la, g[6]), lambda: _pow_exp(b, lb, g[6]),
             lambda: jnp.where(g[7] == 1.0, b / a, ba), lambda: jnp.where(g[7] == 1.0, a / b, 1.0 / ba),
             lambda: t.fit, lambda: jnp.abs(t.rho[0] - t.rho[1]))
    s = functools.reduce(jnp.add, (g[i] * terms[i]() for i in range(6)))  # in the order of the formula
    # A huge weight or power must not put inf or NaN before the argmax.
    return jnp.nan_to_num(-s, nan=-3e38, posinf=3e38, neginf=-3e38)


def _inv(c):
    # Capacities below 1e-30 count as zero: their inverse would overflow.
    return jnp.where(c > 1e-30, 1.0 / jnp.where(c > 1e-30, c, 1.0), 0.0)


def _static_power(x, p: float):
    """x^p (x > 0) for a power known when tracing: square roots and products where 4p is a whole
    number of at most 16 (no exp or log), else exp(p log x)."""
    q = 4.0 * p
    if q != round(q) or abs(q) > 16:
        return jnp.exp(np.float32(p) * jnp.log(x))
    whole, quarters = divmod(abs(int(round(q))), 4)
    factors = []
    if quarters:
        root = jnp.sqrt(x)
        factors += {1: [jnp.sqrt(root)], 2: [root], 3: [root, jnp.sqrt(root)]}[quarters]
    base = x
    while whole:  # x^whole by repeated squaring
        if whole & 1:
            factors.append(base)
        whole >>= 1
        if whole:
            base = base * base
    y = functools.reduce(jnp.multiply, factors) if factors else jnp.ones_like(x)
    return 1.0 / y if p < 0 else y


def _evo_search_cached(f, ic):
    """The machine's halves of evo_search's terms: 1 / f and f^-p1 per CPU and memory (0 and 1
    where f <= 0, which `_kept_ratio` does not read)."""
    p1 = float(_EVO_SEARCH[6])
    pos = tuple(x > 0 for x in f[:2])
    safe = tuple(jnp.where(ok, x, 1.0) for ok, x in zip(pos, f))
    inv = tuple(jnp.where(ok, 1.0 / x, 0.0) for ok, x in zip(pos, safe))
    return inv + tuple(_static_power(x, -p1) for x in safe)


def _kept_ratio(d, f, inv_f, f_p, p):
    """The clamped ratio d / f (`_ratio`) and its power p from the machine's kept 1 / f and f^-p:
    d^p f^-p where the ratio is inside its bounds, else the bound's power."""
    raw = d * inv_f
    inside = (f > 0) & (raw >= RATIO_MIN) & (raw <= RATIO_MAX)
    ratio = jnp.where(f > 0, jnp.clip(raw, RATIO_MIN, RATIO_MAX), jnp.where(d > 0, RATIO_MAX, RATIO_MIN))
    bound = jnp.where(ratio >= RATIO_MAX, np.float32(float(RATIO_MAX) ** p), np.float32(float(RATIO_MIN) ** p))
    return ratio, jnp.where(inside, _static_power(d, p) * f_p, bound)


def _evo_search(t: Terms, g):
    """`family` at evo_search's genome, with its powers fixed when tracing (`_static_power`): at
    p1 = 1/4 and p2 = 4, square roots and products instead of the family's logs and exps (within
    float32 rounding of the family), (a/b)^p2 as the inverse of (b/a)^p2 as in the family. Where a
    full scan keeps each machine's 1 / f and f^-p1 (`Policy.cached`), a and b are products and
    a^p1, b^p1 the task's power of its demand times the machine's (`_kept_ratio`)."""
    w0, w1, w2, w3, w4, w5, p1, p2 = (float(v) for v in _EVO_SEARCH)
    if t.cached:
        (a, a1), (b, b1) = (_kept_ratio(t.d[x], t.f[x], t.cached[x], t.cached[2 + x], p1) for x in (0, 1))
    else:
        a, b = t.a, t.b
        a1, b1 = _static_power(a, p1), _static_power(b, p1)
    ba = _static_power(b / a, p2)  # a, b are clamped to [1e-4, 1e4], so (b/a)^4 is finite
    s = w0 * a1 + w1 * b1 + w2 * ba + w3 * (1.0 / ba) + w4 * t.fit + w5 * jnp.abs(t.rho[0] - t.rho[1])
    return jnp.nan_to_num(-s, nan=-3e38, posinf=3e38, neginf=-3e38)


def _min_strand(t: Terms, g):
    s_c, s_m = t.slot[0], t.slot[1]
    return -(jnp.where(t.r[1] < s_m, t.rho[0], 0.0) + jnp.where(t.r[0] < s_c, t.rho[1], 0.0)) + EPS * t.fit


class Policy(NamedTuple):
    """A registered policy: its spec family and per-machine score (maximized)."""

    name: str
    family: str
    score: Callable[[Terms, jax.Array], jax.Array]  # (terms, genome f32[8]) -> f32[]
    deterministic: bool = True
    uniform: bool = False  # every feasible machine scores the same (the pick is the lowest feasible index)
    # CPU time of a full-scan step relative to best_fit, as experiments/bench_policy_cost.py measures it
    # (1.0 where within the cheap policies' run-to-run noise); it balances device shares (`policy_shares`)
    cost: float = 1.0
    # Terms of the score that depend on the machine alone: (f, ic) -> a tuple of arrays, which the
    # score reads as Terms.cached. A full-scan packing keeps them per machine and recomputes them
    # only where a task lands (the same operations, so the same values); elsewhere Terms.cached is
    # empty and the score computes what it needs itself.
    cached: Callable | None = None
    # A parameterized policy's parameters, flattened: default values, names and (low, high) bounds.
    # Its rows read them from the first len(params) entries of their genome.
    params: tuple = ()
    param_names: tuple = ()
    bounds: tuple = ()

    def box(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) f32[D] of the parameters' bounds (-inf, inf where unbounded)."""
        return tuple(np.array([b[i] for b in self.bounds], np.float32).reshape(-1) for i in (0, 1))


def _policy(name, family_name, fn, deterministic=True, uniform=False, cost=1.0, cached=None):
    return name, Policy(name, family_name, fn, deterministic, uniform, cost, cached)


def _pow10_u0(f, ic):
    """10^u0 per dimension, epvm's term of the machine before placement."""
    return dmap(lambda fx, ix: _pow10(1.0 - jnp.maximum(fx, 0.0) * ix), f, ic)


# The 21 policies of the spec's table, in its order.
REGISTRY: dict[str, Policy] = dict([
    _policy("first_fit", "baseline", lambda t, g: jnp.zeros_like(t.fit), uniform=True, cost=1.3),
    _policy("random", "baseline", lambda t, g: t.noise, deterministic=False),
    _policy("best_fit", "tight pack", lambda t, g: t.fit),
    _policy("norm2", "tight pack", lambda t, g: -dsum(dmap(jnp.square, t.rho))),
    _policy("cheby", "tight pack", lambda t, g: -dmax(t.rho)),
    _policy("dot", "alignment", lambda t, g: dsum(dmap(lambda d, f, i: d * f * i * i, t.d, t.f, t.ic))),
    _policy("cosine", "alignment", lambda t, g: _cos(t), cost=1.4),
    _policy("tetris", "alignment", lambda t, g: dsum(dmap(jnp.multiply, t.d, t.f))),
    _policy("align_fill", "alignment", lambda t, g: _cos(t) + 0.5 * t.fit, cost=1.65),
    _policy("worst_fit", "spread", lambda t, g: -t.fit),
    _policy("epvm", "spread", lambda t, g: -dsum(dmap(lambda u, p0: _pow10(u) - p0, t.u,
                                                       t.cached or _pow10_u0(t.f, t.ic))),
            cached=_pow10_u0, cost=2.25),
    _policy("convex_spread", "spread", lambda t, g: -dsum(dmap(lambda u: 1.0 / (1.05 - u), t.u))),
    _policy("balance", "dim-aware", lambda t, g: -jnp.abs(t.rho[0] - t.rho[1])),
    _policy("min_strand", "dim-aware", _min_strand),
    _policy("imbalance_wt", "dim-aware",
            lambda t, g: -jnp.abs(t.rho[0] - t.rho[1]) * (t.rho[0] + t.rho[1])),
    _policy("slot_loss", "dim-aware", lambda t, g: -(t.slots_f - t.slots_r) + EPS * t.fit, cost=1.6),
    _policy("alpha_evolve", "evolved", lambda t, g: -(t.a + t.b + t.b / t.a + t.a / t.b), cost=1.4),
    _policy("ae_tight", "evolved", lambda t, g: (t.a + t.b) - (t.b / t.a + t.a / t.b), cost=1.3),
    _policy("ae_shape", "evolved", lambda t, g: -(t.b / t.a + t.a / t.b), cost=1.4),
    _policy("ae_pow", "evolved",
            lambda t, g: -(t.a + t.b + (t.b / t.a) * (t.b / t.a) + (t.a / t.b) * (t.a / t.b)), cost=1.4),
    _policy("evo_search", "searched", _evo_search, cost=2.95, cached=_evo_search_cached),
])

# The parameterized family itself, scored at each row's genome; not one of the 21.
# (Its cost: scaled from evo_search's when scored in the family's form, the closest measured kin.)
FAMILY = Policy("family", "parameterized", family, cost=7.1)


# Policies registered by users (`jaxsched.policy`), beside the 21 and not part of 'all'.
USER_POLICIES: dict[str, Policy] = {}


def get_policy(name: str) -> Policy:
    """The policy registered under `name`: one of the 21, the parameterized `family`, or a user's."""
    if name == FAMILY.name:
        return FAMILY
    if name in REGISTRY:
        return REGISTRY[name]
    if name in USER_POLICIES:
        return USER_POLICIES[name]
    known = list(REGISTRY) + [FAMILY.name] + list(USER_POLICIES)
    raise KeyError(f"unknown policy {name!r}; known: {', '.join(known)}")


def genome_width(names) -> int:
    """Entries of a row's genome for these policies: the family's 8, or a user policy's parameter
    count where larger."""
    return max([GENOME_SIZE] + [len(get_policy(n).params) for n in names])


def row_genomes(names, genome=None) -> np.ndarray:
    """f32[len(names), genome_width(names)]: each row's genome, `genome` (default alpha_evolve's
    point) for the family and the policies that read none, a user policy's own parameters for its."""
    width = genome_width(names)
    g = np.asarray(ALPHA_EVOLVE_GENOME if genome is None else genome, np.float32)
    out = np.zeros((len(names), width), np.float32)
    out[:, :g.shape[0]] = g
    for i, name in enumerate(names):
        params = get_policy(name).params
        if params:
            out[i, :len(params)] = params
    return out


# Placement methods usable in place of a policy in `jaxsched snapshot` (not scoring functions, not in 'all').
PLACEMENT_METHODS = ("cvxcluster",)


def policy_names(spec: str) -> tuple[str, ...]:
    """Parse a comma-separated policy list; 'all' is every registered policy."""
    names: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        for name in (REGISTRY if part == "all" else [part]):
            get_policy(name)
            if name not in names:
                names.append(name)
    if not names:
        raise KeyError("no policy given")
    return tuple(names)


def safe_inverse(capacity: jax.Array) -> jax.Array:
    """1 / capacity, 0 where capacity <= 0 (padding machines carry -1)."""
    return _inv(capacity)


def score_machines(policy: Policy, demand, free, inv_capacity, genome, noise, slot, encoded: bool = False,
                   cached=None):
    """Scores of one task on X machines, -inf where infeasible: f32[X].

    demand f32[R]; free, inv_capacity f32[R, X] (dimension-major, from `safe_inverse`),
    or tuples of R f32[X] rows; genome f32[8]; noise f32[X]; slot a static tuple;
    encoded: free is `encode_free`'s; cached: the policy's `cached` terms (f32[E, X] or a tuple of
    E f32[X]) where kept.
    """
    d = tuple(demand[x] for x in range(demand.shape[0]))
    rows = lambda a: a if isinstance(a, tuple) else tuple(a[x] for x in range(a.shape[0]))
    return jax.vmap(lambda f, ic, n, c: score_terms(policy, d, f, ic, genome, n, slot, encoded, c))(
        rows(free), rows(inv_capacity), noise, None if cached is None else rows(cached))


def score_terms(policy: Policy, d, f, ic, genome, noise, slot, encoded: bool = False, cached=None):
    """The score of each machine, -inf where infeasible, from tuples of R per-dimension arrays
    d, f, ic (1 / capacity) that broadcast together with noise; genome: anything whose
    genome[i] broadcasts with them too (f32[8], or f32[8, 1, 1, P] for a trailing row axis);
    encoded: f is `encode_free`'s; cached: the policy's `cached` terms where kept (None: not kept)."""
    t = machine_terms(d, f, ic, noise, slot, () if cached is None else tuple(cached))
    return jnp.where(feasible(d, f, None if encoded else ic), policy.score(t, genome), -jnp.inf)


def _check_score_args(demand, free, capacity, genome, noise) -> None:
    """InputError naming the argument of `score` whose shape or dtype is wrong (shapes only, so
    that `score` still traces)."""
    arrays = {"demand": demand, "free": free, "capacity": capacity, "genome": genome, "noise": noise}
    shapes = {}
    for name, value in arrays.items():
        if value is None:
            continue
        dtype = getattr(value, "dtype", None)
        dtype = np.asarray(value).dtype if dtype is None else np.dtype(dtype)
        if not (np.issubdtype(dtype, np.floating) or np.issubdtype(dtype, np.integer)) or dtype == np.bool_:
            raise InputError(f"score: {name} must hold numbers, got dtype {dtype}")
        shapes[name] = tuple(np.shape(value))
    if len(shapes["free"]) != 2:
        raise InputError(f"score: free must be [machines, resources], got shape {shapes['free']}")
    M, R = shapes["free"]
    if shapes["capacity"] != (M, R):
        raise InputError(f"score: capacity must have free's shape ({M}, {R}) [machines, resources], got "
                         f"{shapes['capacity']}")
    if shapes["demand"] != (R,):
        raise InputError(f"score: demand must have one entry per resource ({R}), got shape {shapes['demand']}")
    if genome is not None and shapes["genome"] != (GENOME_SIZE,):
        raise InputError(f"score: genome must have {GENOME_SIZE} entries, got shape {shapes['genome']}")
    if noise is not None and shapes["noise"] != (M,):
        raise InputError(f"score: noise must have one entry per machine ({M}), got shape {shapes['noise']}")


def score(name: str, demand, free, capacity, genome=None, noise=None, slot=None) -> jax.Array:
    """Score one task on every machine, in the user layout.

    Args:
        name: a registered policy, or "family".
        demand: f32[R], the task's request.
        free: f32[M, R], each machine's free capacity.
        capacity: f32[M, R], each machine's capacity.
        genome: f32[8], the `family` policy's w0..w5, p1, p2 (default alpha_evolve's point).
        noise: f32[M] uniform draws, the `random` policy's scores.
        slot: the standard slot per dimension (default 0.05 on CPU and memory).

    Returns:
        f32[M], the scores to maximize, -inf on infeasible machines.
    """
    _check_score_args(demand, free, capacity, genome, noise)
    demand = jnp.asarray(demand, jnp.float32)
    free_t = jnp.asarray(free, jnp.float32).T
    cap_t = jnp.asarray(capacity, jnp.float32).T
    g = jnp.asarray(ALPHA_EVOLVE_GENOME if genome is None else genome, jnp.float32)
    n = jnp.zeros(cap_t.shape[1], jnp.float32) if noise is None else jnp.asarray(noise, jnp.float32)
    return score_machines(get_policy(name), demand, free_t, safe_inverse(cap_t), g, n,
                          slot_vector(slot, cap_t.shape[0]))
