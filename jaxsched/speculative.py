"""Several tasks per step, exactly: speculative windows for the sampled picker (sample_k > 0).

The picker of docs/spec/POLICIES.md places one task at a time. Here every (policy row, trial)
pair, a *row*, keeps its own cursor into its trial's task order, and one step of the loop
takes the next W tasks of every row at once: each scores its K drawn machines against the
state at the start of the step and takes its pick.

Why this is exact: a task's draws are fixed in advance (a counter hash of its trial and its
place in the order), and placing a task changes only the machine it lands on. So task w's pick
against the step's starting state is its pick against the true state unless an earlier task
w' < w of the window landed on one of task w's draws (a *conflict*), or task w has no feasible
draw and may fit somewhere (the spec's full-scan fallback must see the true state). Each row
keeps its tasks before the first such task, which are exactly the one-at-a-time picker's, and
its next step starts there. The first task of a window always stands: it sees the true state,
and its fallback scan, when it needs one, runs in the step. Kept tasks land on distinct
machines (a second landing on one would have been a conflict), so their placements commute.

Conflicts (`_conflicts`): in a narrow window, each task's draws are compared with the picks
of the tasks before it; in a wide one, each pick stamps its machine with its place in the
window (a scatter-max, the earliest place highest), and task w conflicts where a draw holds a
stamp of an earlier place. A task whose demand fits no machine needs no scan
and ends no window: free capacity only shrinks while a snapshot packs, so a `Bound` of the
state at the start of a chunk, and the row's last failed full scans (a demand at least as
large in every dimension fits nowhere either), rule it out for good.

A compiled call runs a *chunk*: steps until every row's cursor reaches lo + L (lo: the lowest
cursor), with the tasks and draws of positions lo .. lo + L + W of each trial computed once for
all of the trial's rows. The state is row-major pairs of dimensions, complex64[P, T, C, Mp]
(`to_pairs`), so that one gather fetches two dimensions of a drawn machine.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import interrupt, rng
from .pickers import lowest_best, pick
from .policies import FEASIBILITY_TOL, get_policy, score_machines, score_terms

CHUNK_TASKS = 2048  # L: positions a compiled call advances every row by, at least
MEMO = 8  # failed full scans remembered per row
STAIRS = 4  # thresholds per dimension of a row's Bound staircase
# The drawn machines' inverse capacity is tabled once a chunk where at least this many policy
# rows share each trial's draws and the table stays this small (else gathered at every step).
INV_TABLE_ROWS, INV_TABLE_BYTES = 3, 8 << 20
DIRECT_CONFLICTS = 8  # windows up to this wide find conflicts by comparing draws with picks
MAX_MACHINES = 1 << 24  # machine indices are compared as float32 (`pickers.lowest_best`)


class Rows(NamedTuple):
    """What each row packs with, besides the shared workload."""

    genome: jax.Array  # f32[P, D]: the policy row's genome
    scale: jax.Array  # f32[P, T]: multiplies the row's demands
    limit: jax.Array  # i32[P, T]: the row packs only tasks of index < limit


class Carry(NamedTuple):
    """What one chunk hands to the next."""

    free: jax.Array  # complex64[P, T, C, Mp]: the state, `to_pairs` form
    cursor: jax.Array  # i32[P, T]: the row's next place in its trial's order
    machine: jax.Array  # i32[P, T, N]: the machine of each place (Mp: none), filled as rows advance
    memo: jax.Array  # f32[P, T, MEMO, R]: demands whose full scan found no machine (+inf: empty)
    memo_count: jax.Array  # i32[P, T]
    steps: jax.Array  # i32[S]: steps run so far (one count per shard of the trials)
    scans: jax.Array  # i32[S]: fallback scans run so far


class Bound(NamedTuple):
    """Necessary conditions for a row's task to fit some machine, from the row's free capacity
    at the start of a chunk. Besides each dimension's largest free value, a staircase of the
    first two: for thresholds `cut` on dimension x, the largest free value of dimension 1 - x
    among the machines whose free x is at least the threshold."""

    top: jax.Array  # f32[G, R]
    cut: jax.Array  # f32[2, G, S]
    other: jax.Array  # f32[2, G, S]


def to_pairs(x):
    """f32[..., R, X] as complex64[..., ceil(R / 2), X]: dimensions 2c and 2c + 1 in one element.

    Complex addition is the float addition of each part, so placements are bit-identical.
    """
    if x.shape[-2] % 2:
        x = jnp.concatenate([x, jnp.zeros_like(x[..., :1, :])], axis=-2)
    return lax.complex(x[..., 0::2, :], x[..., 1::2, :])


def from_pairs(z, R: int):
    """The f32[..., R, X] that `to_pairs` packed into z."""
    x = jnp.stack([z.real, z.imag], axis=-2)  # [..., C, 2, X]
    return x.reshape(*z.shape[:-2], 2 * z.shape[-2], z.shape[-1])[..., :R, :]


def pair_rows(z, R: int, axis: int = -2) -> tuple:
    """The R rows that `to_pairs` packed into z along `axis` (there of size C; no stacked copy)."""
    take = lambda c: lax.index_in_dim(z, c, axis, keepdims=False)
    return tuple(part(take(c)) for c in range(z.shape[axis]) for part in (jnp.real, jnp.imag))[:R]


def window_for(num_machines: int, sample_k: int) -> int:
    """The default W: the largest power of two at most 0.9 sqrt(M / K), from 4 to 32.

    Task w of a window conflicts with probability about w K / M, so a row keeps about
    sqrt(M / K) tasks a step; a longer window mostly scores draws it then throws away. Powers of
    two: on the Google 2011 sample (25 rows, M / K = 196) W = 8 packs about a fifth faster than
    W = 12 on XLA:CPU, and on 50,000 machines W = 16 beats 24 and 32
    (experiments/profile_sampled.py --window). Results do not depend on W.
    """
    target = 0.9 * np.sqrt(num_machines / max(sample_k, 1))
    return int(np.clip(2 ** np.floor(np.log2(max(target, 1.0))), 4, 32))


def staircase_cuts(demand) -> np.ndarray:
    """f32[2, STAIRS]: the Bound's thresholds on the first two dimensions, evenly spaced order
    statistics of the tasks' demands there (any thresholds are sound; these separate the tasks)."""
    d = np.asarray(demand, np.float32)
    if d.ndim != 2 or d.shape[1] < 2 or d.shape[0] == 0:
        return np.zeros((2, 0), np.float32)
    picks = np.linspace(0, d.shape[0] - 1, STAIRS).round().astype(np.int64)
    return np.ascontiguousarray(np.sort(d[:, :2], axis=0)[picks].T)


def _bound(dims, cuts) -> Bound:
    """The Bound of free dims (R x f32[G, Mp]) with staircase thresholds cuts f32[2, G, S]."""
    top = jnp.stack([jnp.max(x, axis=-1) for x in dims], axis=-1)
    if len(dims) < 2 or cuts.shape[-1] == 0:
        return Bound(top, cuts, cuts)
    # One threshold at a time: each maximum is one pass over the state, with no [G, S, Mp] intermediate.
    other = [jnp.stack([jnp.max(jnp.where(dims[x] >= cuts[x][:, k, None], dims[1 - x], -jnp.inf), axis=-1)
                        for k in range(cuts.shape[-1])], axis=-1) for x in range(2)]
    return Bound(top, cuts, jnp.stack(other))


def _may_fit(bound: Bound, d):
    """False where `bound` shows that the task d f32[G, W, R] of a row fits no machine: bool[G, W].

    Feasibility is d_x <= f_x + tol. Where cut + tol < d_x (in float32), a machine with free x
    below the cut is infeasible, so a feasible one is among those the staircase step counts,
    and its free 1 - x is at most `other`.
    """
    ok = jnp.all(d <= bound.top[:, None, :] + FEASIBILITY_TOL, axis=-1)
    for x in range(2 if bound.cut.shape[-1] else 0):
        step = bound.cut[x][:, None, :] + FEASIBILITY_TOL < d[..., x, None]  # [G, W, S]
        limit = jnp.min(jnp.where(step, bound.other[x][:, None, :], jnp.inf), axis=-1)
        ok = ok & (d[..., 1 - x] <= limit + FEASIBILITY_TOL)
    return ok


def _groups(policies: tuple[str, ...], T: int):
    """(name, first flattened row, end row) of each run of equal policy names (rows p-major)."""
    out, row = [], 0
    for name in policies:
        if out and out[-1][0] == name:
            out[-1] = (name, out[-1][1], out[-1][2] + T)
        else:
            out.append((name, row, row + T))
        row += T
    return out


def _scan_rows(free, d0, pos0, need, trial, genome, inv_dims, nwords, groups, slot, none):
    """A full scan of the current state for the first task of each row in `need` (bool[G]):
    (i32[G], `none` elsewhere or where it fits nowhere; free, passed through).

    One row at a time, in a while loop over the rows left (in a big batch a few rows miss at a
    step), each scored by its own policy's branch of a `lax.switch`. free complex64[G, C, Mp];
    d0 f32[G, R]; pos0 i32[G]: the task's place in the order (the `random` policy's noise
    step). The state goes through the loop's carry: a loop that only read it would make XLA copy it.
    """
    G, C, Mp = free.shape
    R = d0.shape[-1]
    iota = jnp.arange(G, dtype=jnp.int32)
    group_of = jnp.asarray(np.repeat(np.arange(len(groups)), [hi - lo for _, lo, hi in groups]), jnp.int32)
    first = lambda mask: jnp.min(jnp.where(mask, iota, G))

    def branch(policy):
        def scan(fr, r):
            f_r = pair_rows(lax.dynamic_index_in_dim(fr, r, 0, keepdims=False), R)
            if policy.deterministic:
                noise = jnp.zeros(Mp, jnp.float32)
            else:
                words = lax.dynamic_index_in_dim(nwords, trial[r], 0)
                noise = rng.uniform_noise(words, pos0[r], jnp.arange(Mp))[0]
            s = score_machines(policy, d0[r], f_r, inv_dims, genome[:, r], noise, slot, encoded=True)
            return pick(policy, s, none)  # `none` where no machine is feasible
        return scan

    branches = [branch(get_policy(name)) for name, _, _ in groups]

    def body(state):
        r, mask, res, fr = state
        j = lax.switch(group_of[r], branches, fr, r) if len(branches) > 1 else branches[0](fr, r)
        mask = mask.at[r].set(False)
        return first(mask), mask, res.at[r].set(j), fr

    init = (first(need), need, jnp.full((G,), none, jnp.int32), free)
    _, _, out, free = lax.while_loop(lambda s: s[0] < G, body, init)
    return out, free


def _scan_when(free, *args):
    """`_scan_rows` behind one test (most steps scan nothing), as a while loop of at most one
    trip: a lax.cond passing the state through would copy it."""
    need, none = args[2], args[-1]

    def body(c):
        scanned, fr = _scan_rows(c[2], *args)
        return jnp.bool_(False), scanned, fr

    init = (jnp.any(need), jnp.full(need.shape, none, jnp.int32), free)
    _, scanned, free = lax.while_loop(lambda c: c[0], body, init)
    return scanned, free


def chunk(carry: Carry, rows: Rows, inv, demand, order, cuts, swords, nwords, num_tasks, num_machines, *,
          policies: tuple[str, ...], sample_k: int, slot: tuple, window: int, chunk_tasks: int,
          limited: bool = True) -> Carry:
    """Advance every row of `carry` by at least `chunk_tasks` places (or to the end): the next Carry.

    inv complex64[C, Mp]: 1 / capacity, `to_pairs` form; demand f32[N, R]; order i32[T, N + pad]:
    each trial's task order, padded by chunk_tasks + window places; cuts f32[2, S]: the Bound's
    thresholds before each row's scale (`staircase_cuts`); swords, nwords u32[T, 2]: the sample
    and noise streams (`rng.hash_words`); `policies` one name per policy row; limited: whether
    some row's task limit is below the task count (else the limits are not read).
    """
    P, T, C, Mp = carry.free.shape
    G, R, W, K = P * T, demand.shape[-1], window, sample_k
    none = jnp.int32(Mp)
    groups = _groups(policies, T)
    flat = lambda a: a.reshape(G, *a.shape[2:])
    free, cursor, machine, memo, memo_count = (flat(a) for a in carry[:5])
    trial = jnp.tile(jnp.arange(T, dtype=jnp.int32), P)  # row g = p T + t
    genome = jnp.repeat(rows.genome, T, axis=0).T  # [D, G]
    scale, limit = rows.scale.reshape(G), rows.limit.reshape(G)
    N = machine.shape[1]

    lo = jnp.min(cursor)
    end = jnp.minimum(lo + chunk_tasks, num_tasks)
    n_tab = chunk_tasks + W
    # Places lo .. lo + n_tab of every trial: tasks and draws, shared by the trial's rows.
    draws = rng.sample_table(swords, lo, n_tab, K, num_machines)  # [T, n_tab, K]
    inv_dims = pair_rows(inv, R, 0)
    # The drawn machines' inverse capacity, once a chunk where several policy rows share a trial's
    # draws: a step then takes contiguous slices instead of a gather per draw.
    use_tab = P >= INV_TABLE_ROWS and T * n_tab * C * K * 8 <= INV_TABLE_BYTES
    inv_tab = jnp.moveaxis(inv[:, draws], 0, -2) if use_tab else None  # [T, n_tab, C, K]
    inv_flat = None if use_tab else inv.reshape(-1)
    tasks = lax.dynamic_slice_in_dim(order, lo, n_tab, axis=1)  # [T, n_tab]
    demands = demand[tasks]  # [T, n_tab, R]: one gather a step instead of two
    # The chunk's first state bounds every later one (free only shrinks).
    bound = _bound(pair_rows(free, R, 1), cuts[:, None, :] * scale[None, :, None])
    noisy = any(not get_policy(n).deterministic for n in policies)
    g_iota = jnp.arange(G, dtype=jnp.int32)
    w_iota = jnp.arange(W, dtype=jnp.int32)
    planes = (g_iota[:, None] * C + jnp.arange(C, dtype=jnp.int32)[None]) * Mp  # [G, C]

    def step(state):
        free, cursor, machine, memo, memo_count, stamps, i, scans = state
        active = cursor < end
        pos = cursor[:, None] + w_iota[None]  # [G, W]
        rel = pos - lo
        idx = draws[trial[:, None], rel]  # [G, W, K]
        d = demands[trial[:, None], rel] * scale[:, None, None]  # [G, W, R]
        live = active[:, None] & (pos < num_tasks)
        if limited:
            live = live & (tasks[trial[:, None], rel] < limit[:, None])

        # Each gather is one 1-D gather of in-range indices.
        f_at = planes[:, :, None, None] + idx[:, None]
        f_dims = pair_rows(free.reshape(-1).at[f_at].get(mode="promise_in_bounds"), R, 1)  # R x [G, W, K]
        if use_tab:
            i_dims = pair_rows(inv_tab[trial[:, None], rel], R, 2)  # R x [G, W, K]
        else:
            i_at = jnp.arange(C, dtype=jnp.int32)[:, None, None, None] * Mp + idx[None]
            i_dims = pair_rows(inv_flat.at[i_at].get(mode="promise_in_bounds"), R, 0)
        if noisy:
            noise = jax.vmap(lambda wd, ps, ix: jax.vmap(lambda p, x: rng.uniform_noise(wd[None], p, x)[0])(ps, ix))(
                nwords[trial], pos, idx)
        scores = []
        for name, a, b in groups:
            rows_of = lambda v: v[a:b]
            scores.append(score_terms(get_policy(name), tuple(d[a:b, :, x, None] for x in range(R)),
                                      tuple(map(rows_of, f_dims)), tuple(map(rows_of, i_dims)),
                                      genome[:, a:b, None, None],
                                      noise[a:b] if noisy else jnp.zeros((1, 1, 1), jnp.float32), slot, encoded=True))
        # One pick for all policies: the reductions run once, not once per policy.
        j = lowest_best(jnp.concatenate(scores) if len(scores) > 1 else scores[0], idx, none)  # [G, W]

        hopeless = ~_may_fit(bound, d) | jnp.any(jnp.all(memo[:, None] <= d[:, :, None], axis=-1), axis=-1)
        need = live & (j == none) & ~hopeless
        # The window's first task sees the true state: its fallback scan runs here.
        scanned, free = _scan_when(free, d[:, 0], pos[:, 0], need[:, 0], trial, genome, inv_dims, nwords, groups,
                                   slot, none)
        j = jnp.where(live, j.at[:, 0].set(jnp.where(need[:, 0], scanned, j[:, 0])), none)
        failed = need[:, 0] & (scanned == none)
        into = failed[:, None] & (jnp.arange(MEMO)[None] == (memo_count % MEMO)[:, None])
        memo = jnp.where(into[..., None], d[:, 0, None], memo)
        memo_count = memo_count + failed.astype(jnp.int32)

        clash, stamps = _conflicts(idx, j, stamps, i)
        stop = (clash | need) & (w_iota > 0)[None]
        kept = jnp.min(jnp.where(stop, w_iota[None], W), axis=1)  # [G]: at least 1
        keep = (w_iota[None] < kept[:, None]) & active[:, None]

        landed = jnp.where(keep, j, none)
        at = jnp.where((landed == none)[..., None], free.size, planes[:, None, :] + landed[..., None])
        free = free.reshape(-1).at[at.reshape(-1)].add(_pairs_last(-d).reshape(-1), mode="drop",
                                                       unique_indices=True).reshape(free.shape)
        slot_at = jnp.where(keep & (pos < N), g_iota[:, None] * N + pos, machine.size)
        machine = machine.reshape(-1).at[slot_at.reshape(-1)].set(j.reshape(-1), mode="drop",
                                                                   unique_indices=True).reshape(machine.shape)
        cursor = jnp.where(active, cursor + kept, cursor)
        return free, cursor, machine, memo, memo_count, stamps, i + 1, scans + jnp.sum(need[:, 0].astype(jnp.int32))

    stamps = jnp.full((G, Mp + 1 if W > DIRECT_CONFLICTS else 0), -1.0, jnp.float32)
    state = (free, cursor, machine, memo, memo_count, stamps, jnp.int32(0), jnp.int32(0))
    free, cursor, machine, memo, memo_count, _, steps, scans = lax.while_loop(
        lambda s: jnp.any(s[1] < end), step, state)
    back = lambda a: a.reshape(P, T, *a.shape[1:])
    return Carry(back(free), back(cursor), back(machine), back(memo), back(memo_count),
                 carry.steps + steps, carry.scans + scans)


def _conflicts(idx, j, stamps, i):
    """Whether an earlier task of the window picked one of task w's draws: (bool[G, W], stamps),
    from the draws idx i32[G, W, K] and the picks j i32[G, W] of step i (`none` where none;
    never a draw).

    Windows of at most DIRECT_CONFLICTS tasks compare: W - 1 elementwise tests (task v's pick
    against the draws of the tasks after v), then a float max over the draws (XLA:CPU's fast
    reduction), and `stamps` (f32[G, 0]) is not read. Wider ones, where those tests grow as
    W squared, stamp: each pick writes i W + W - 1 - w at its machine in stamps f32[G, Mp + 1]
    (older steps' stamps are lower, so the record is never cleared), and task w conflicts where
    one of its draws holds a stamp above its own. docs/performance.md has the timings.
    """
    G, W = j.shape
    place = jnp.arange(W, dtype=jnp.int32)
    if W <= DIRECT_CONFLICTS:
        hit = functools.reduce(jnp.logical_or, [(idx == j[:, v, None, None]) & (place > v)[None, :, None]
                                                for v in range(W - 1)], jnp.zeros(idx.shape, bool))
        return jnp.max(jnp.where(hit, 1.0, 0.0), axis=-1) > 0, stamps
    own = (i * W).astype(jnp.float32) + (W - 1 - place).astype(jnp.float32)  # float: XLA's fast max
    rows = jnp.arange(G, dtype=jnp.int32)[:, None] * stamps.shape[1]
    stamps = stamps.reshape(-1).at[(rows + j).reshape(-1)].max(jnp.broadcast_to(own, (G, W)).reshape(-1))
    seen = jnp.max(stamps.at[rows[..., None] + idx].get(mode="promise_in_bounds"), axis=-1)  # [G, W]
    return seen > own[None], stamps.reshape(G, -1)


def _pairs_last(x):
    """f32[..., R] as complex64[..., ceil(R / 2)]: dimensions 2c and 2c + 1 in one element."""
    if x.shape[-1] % 2:
        x = jnp.concatenate([x, jnp.zeros_like(x[..., :1])], axis=-1)
    return lax.complex(x[..., 0::2], x[..., 1::2])


_STATIC = ("policies", "sample_k", "slot", "window", "chunk_tasks", "limited")
_chunk = jax.jit(chunk, static_argnames=_STATIC, donate_argnames=("carry",))

# Specs of a chunk split over trials: Carry, Rows, then inv, demand, order, cuts, swords, nwords,
# num_tasks, num_machines.
_PT, _T, _REP = PartitionSpec(None, "trials"), PartitionSpec("trials"), PartitionSpec()
_CARRY_SPECS = Carry(_PT, _PT, _PT, _PT, _PT, _T, _T)
_ARG_SPECS = (_CARRY_SPECS, Rows(_REP, _PT, _PT), _REP, _REP, _T, _REP, _T, _T, _REP, _REP)


@functools.lru_cache(maxsize=64)
def _sharded_chunk(devices: tuple, **static):
    """`chunk` with the trial axis split over `devices` (one host or several): trials are
    independent, so each device runs the unchanged chunk on its share."""
    mesh = Mesh(np.asarray(devices), ("trials",))
    fn = jax.shard_map(functools.partial(chunk, **static), mesh=mesh, check_vma=False, in_specs=_ARG_SPECS,
                       out_specs=_CARRY_SPECS)
    return jax.jit(fn, donate_argnums=(0,)), mesh


def _global(x, mesh, spec):
    """x (the same full value on every process) as a global array sharded by `spec` over `mesh`."""
    full = np.asarray(x)
    return jax.make_array_from_callback(full.shape, NamedSharding(mesh, spec), lambda index: full[index])


def pack_trials(cfg, free0, inv_t, demand, orders, num_machines, genomes, swords, nwords, scale, limit, progress,
                devices, to_host, chunk_tasks: int | None = None):
    """Pack a group of trials with the sampled picker: (free f32[P, T, R, Mp] as the state holds
    it, machine i32[N, P, T], Mp where unplaced).

    free0 f32[P, T, R, Mp]: the starting state (`policies.encode_free`, padding and machines
    outside a row's prefix at -1); inv_t f32[R, Mp]; orders i32[T, N]; genomes f32[P, D]; scale
    f32[P, T]; limit i32[P, T]; devices: one, or several to split the trials over (T a multiple
    of their count); `to_host` gathers a result onto this process. The window is cfg.window,
    or `window_for` the cluster where that is 0.
    """
    P, T, R, Mp = free0.shape
    N = orders.shape[1]
    window = cfg.window or window_for(num_machines, cfg.sample_k)
    chunk_tasks = chunk_tasks or CHUNK_TASKS
    if Mp >= MAX_MACHINES:
        raise ValueError(f"the sampled picker takes fewer than {MAX_MACHINES} machines, got {Mp}")
    order = np.zeros((T, N + chunk_tasks + window), np.int32)
    order[:, :N] = orders
    S = max(len(devices), 1)
    carry = Carry(free=_pairs_np(free0), cursor=np.zeros((P, T), np.int32),
                  machine=np.full((P, T, max(N, 1)), Mp, np.int32),
                  memo=np.full((P, T, MEMO, R), np.inf, np.float32), memo_count=np.zeros((P, T), np.int32),
                  steps=np.zeros(S, np.int32), scans=np.zeros(S, np.int32))
    rows = Rows(np.asarray(genomes, np.float32), np.asarray(scale, np.float32), np.asarray(limit, np.int32))
    args = (_pairs_np(inv_t), np.asarray(demand, np.float32), order, staircase_cuts(demand), np.asarray(swords),
            np.asarray(nwords), np.int32(N), np.int32(num_machines))
    static = dict(policies=tuple(cfg.policies), sample_k=cfg.sample_k, slot=cfg.slot, window=window,
                  chunk_tasks=chunk_tasks, limited=bool(np.any(np.asarray(limit) < N)))
    if len(devices) > 1:
        fn, mesh = _sharded_chunk(tuple(devices), **static)
        carry = Carry(*(_global(x, mesh, spec) for x, spec in zip(carry, _CARRY_SPECS)))
        rows = Rows(*(_global(x, mesh, spec) for x, spec in zip(rows, _ARG_SPECS[1])))
        args = [_global(x, mesh, spec) for x, spec in zip(args, _ARG_SPECS[2:])]
        run = lambda c: fn(c, rows, *args)
    else:  # on the device once, not copied over at every chunk
        put = lambda tree: jax.device_put(tree, devices[0] if devices else None)
        carry, rows, args = put(carry), put(rows), put(args)
        run = lambda c: _chunk(c, rows, *args, **static)
    done = 0
    while done < N:
        interrupt.checkpoint()
        carry = run(carry)
        done = int(np.min(to_host(carry.cursor)))
        if progress is not None:
            progress(min(done, N), N)
    global LAST_STATS
    LAST_STATS = dict(steps=int(np.max(to_host(carry.steps))), scans=int(np.sum(to_host(carry.scans))))
    z = to_host(carry.free)
    free = np.stack([z.real, z.imag], axis=-2).reshape(*z.shape[:-2], 2 * z.shape[-2], Mp)[..., :R, :]
    machine = np.moveaxis(to_host(carry.machine)[:, :, :N], -1, 0)
    return np.ascontiguousarray(free, np.float32), machine


def _pairs_np(x) -> np.ndarray:
    """`to_pairs` in numpy (the parts copied exactly)."""
    x = np.asarray(x, np.float32)
    if x.shape[-2] % 2:
        x = np.concatenate([x, np.zeros_like(x[..., :1, :])], axis=-2)
    z = np.empty((*x.shape[:-2], x.shape[-2] // 2, x.shape[-1]), np.complex64)
    z.real, z.imag = x[..., 0::2, :], x[..., 1::2, :]
    return z


LAST_STATS: dict = {}  # the last pack_trials' step and fallback-scan counts (for benchmarks)
