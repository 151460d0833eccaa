"""Running a replay: the compiled loop of steps, its rows split over the local devices, and
the figures of an experiment computed from the run segments on the host."""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import interrupt, rng
from ..devices import SlowestShare, on_devices
from ..errors import InputError
from ..packing import PAD_CAPACITY
from ..policies import genome_width, row_genomes, safe_inverse, slot_vector
from ..user_policies import check_policies
from ..types import Cluster, Workload, validate
from .config import EXPERIMENT, EventConfig, EventRunConfig
from .drain import SPAN_WORDS, WORD_SHIFT
from .inputs import INF, EventInputs, demand_classes, prepare
from .state import EVENT, S_TASK, TASK_CHUNK, Static, count64, initial_state
from .stats import row_stats
from .step import step

STEPS_PER_CALL = 256  # outer events in the first compiled call; later calls are paced to about
MAX_STEPS_PER_CALL = 1 << 16  # interrupt.TARGET_CALL_S each, up to this many events


def _live(state, num_tasks):
    ctl = state.ctl
    return (ctl.arrived < num_tasks) | (jnp.min(state.chunk_min, axis=1) < INF) | (ctl.mode != EVENT)


def _run(state, st, limit, *, cfg, num_machines, num_tasks):
    """Up to `limit` steps of the replay: (state, any row not finished, steps taken)."""
    def cond(c):
        s, i = c
        return (i < limit) & jnp.any(_live(s, num_tasks))

    state, taken = lax.while_loop(cond, lambda c: (step(cfg, st, c[0], num_machines, num_tasks), c[1] + 1),
                                  (state, jnp.int32(0)))
    return state, jnp.any(_live(state, num_tasks)), taken


_run_jit = jax.jit(_run, static_argnames=("cfg", "num_machines", "num_tasks"), donate_argnames=("state",))


@dataclasses.dataclass(frozen=True)
class Replay:
    """What one batched replay produced, per row (policy x trial), in workload task numbering."""

    inputs: EventInputs
    segments: list[np.ndarray]  # per row: i64[S_b, 4] (task, machine, start tick, end tick), in start order
    first_start: np.ndarray  # i64[B, N] first start tick per workload task, -1 never placed
    evictions: np.ndarray  # i64[B]
    steps: int  # outer loop steps taken (the slowest row's event count)
    drain_draws: np.ndarray  # i64[B]: drain tries that drew machines
    drain_certain: np.ndarray  # i64[B]: drain tries that a certificate showed to fail, without draws


def _static(cap: np.ndarray, inputs: EventInputs, genomes, keys, Np: int) -> tuple[Static, int]:
    """The replay's traced inputs, padded (machines to 128, tasks to Np, classes to 128), and the
    padded class count."""
    M, R = cap.shape
    N = inputs.num_tasks
    Mp = -(-M // 128) * 128
    cls, class_demand = demand_classes(inputs.demand, inputs.band)
    Cp = -(-len(class_demand) // 128) * 128
    class_demand = np.concatenate([class_demand, np.full((Cp - len(class_demand), R), np.inf, np.float32)])
    cap_t = np.full((R, Mp), PAD_CAPACITY, np.float32)
    cap_t[:, :M] = cap.T
    demand = np.zeros((Np, R), np.float32)
    demand[:N] = inputs.demand
    pad = lambda a, fill: np.concatenate([a, np.full(Np - N, fill, a.dtype)])
    st = Static(cap=jnp.asarray(cap_t), inv=safe_inverse(jnp.asarray(cap_t)), demand=jnp.asarray(demand),
                arrival=jnp.asarray(pad(inputs.arrival, INF)), band=jnp.asarray(pad(inputs.band, 0)),
                rank=jnp.asarray(pad(inputs.evict_rank, INF)), cls=jnp.asarray(pad(cls, 0)),
                class_demand=jnp.asarray(class_demand), genomes=genomes,
                swords=rng.hash_words(keys, rng.STREAM_SAMPLE), nwords=rng.hash_words(keys, rng.STREAM_NOISE))
    return st, Cp


def replay(cluster: Cluster, workload: Workload, cfg: EventConfig, keys: jax.Array, genomes=None,
           max_evictions: int | None = None, progress: Callable[[int, int], None] | None = None,
           inputs: EventInputs | None = None) -> Replay:
    """Replay the workload's arrivals through every row of `cfg` (rows = policies x trials).

    Args:
        cluster: the machines.
        workload: the tasks, with arrival times and durations.
        cfg: the replay program: one policy per row, the picker, preemption, engine knobs.
        keys: one trial key per row (`rng.trial_keys`, repeated per policy).
        genomes: f32[B, 8] for `family` rows (default alpha_evolve's point).
        max_evictions: room for evictions in the segment log (default: the task count).
        progress: progress(done, total), processed events of the slowest row against 2 N.
        inputs: the workload already `prepare`d for this cfg, if at hand.

    Returns:
        The Replay: every row's run segments, first starts, evictions and drain counts.

    Raises:
        InputError: rows and keys disagree, a bad sample_k or genome shape, or more
            evictions than `max_evictions`.
    """
    inputs = inputs or prepare(workload, cfg.preempt)
    cap = np.asarray(cluster.capacity, np.float32)
    M, R = cap.shape
    N = inputs.num_tasks
    B = len(cfg.policies)
    if keys.shape[0] != B:
        raise InputError(f"{B} rows need {B} keys, got {keys.shape[0]}")
    if cfg.sample_k < 0:
        raise InputError(f"sample_k must be >= 0, got {cfg.sample_k}")
    cfg = dataclasses.replace(cfg, slot=slot_vector(cfg.slot, R))
    if N == 0:  # nothing arrives: every row's replay is empty
        zero = np.zeros(B, np.int64)
        return Replay(inputs=inputs, segments=[np.zeros((0, 4), np.int64) for _ in range(B)],
                      first_start=np.zeros((B, 0), np.int64), evictions=zero, steps=0, drain_draws=zero,
                      drain_certain=zero)
    Np = -(-N // TASK_CHUNK) * TASK_CHUNK
    E = N if max_evictions is None else int(max_evictions)
    S = N + (E if cfg.preempt else 0)
    span = SPAN_WORDS << WORD_SHIFT
    L = -(-(3 * Np + 2 * cfg.queue_window) // span) * span
    if genomes is None:
        genomes = row_genomes(cfg.policies)
    genomes = jnp.asarray(genomes, jnp.float32)
    if genomes.shape != (B, genome_width(cfg.policies)):
        raise InputError(f"genomes must have shape ({B}, {genome_width(cfg.policies)}), got {genomes.shape}")
    st, Cp = _static(cap, inputs, genomes, keys, Np)
    state = initial_state(st.cap, inputs.duration, B, Np, S, L, Cp, L >> WORD_SHIFT)
    state, steps = _replay_on_devices(state, st, cfg, M, N, progress, S if cfg.preempt else None)
    ctl = jax.tree.map(np.asarray, state.ctl)
    seg = np.asarray(state.seg)
    first = np.asarray(state.tasks.first_start[:, :N]).astype(np.int64)
    segments = []
    for b in range(B):
        s = seg[b, :, :ctl.segments[b]].T.astype(np.int64)
        s[:, S_TASK] = inputs.order[s[:, S_TASK]]
        segments.append(s)
    first_start = np.full((B, N), -1, np.int64)
    first_start[:, inputs.order] = first
    drawn = count64(ctl.drawn, ctl.drawn_hi)
    return Replay(inputs=inputs, segments=segments, first_start=first_start,
                  evictions=ctl.evictions.astype(np.int64), steps=steps, drain_draws=drawn,
                  drain_certain=count64(ctl.tries, ctl.tries_hi) - drawn)


def _too_many_evictions(E: int) -> InputError:
    return InputError(f"more than {E} evictions in a replay (the replay stopped there); raise --max-evictions")


def _drive(state, st, cfg, M, N, report, max_segments=None):
    """Run the compiled replay loop to the end: (final state, steps); report(done, 2N) per call,
    done counting the events of the share's slowest row. Calls are paced to about
    `interrupt.TARGET_CALL_S` (the steps run are the same whatever their split), and a share
    run in a thread of its own stops between two of them when it is called off. A row whose
    segment log overflows `max_segments` (more evictions than it has room for) ends the
    replay at that call with an InputError."""
    steps, live = 0, True
    pacer = interrupt.Pacer(STEPS_PER_CALL, least=min(16, STEPS_PER_CALL), most=MAX_STEPS_PER_CALL)
    while live:
        interrupt.checkpoint()
        limit = pacer.start()
        state, live, taken = _run_jit(state, st, jnp.int32(limit), cfg=cfg, num_machines=M, num_tasks=N)
        live = bool(live)
        pacer.done()
        steps += int(taken)
        if max_segments is not None and bool(jnp.any(state.ctl.segments > max_segments)):
            raise _too_many_evictions(max_segments - N)  # the other devices' shares stop too
        if report is not None:
            ctl = state.ctl
            running = np.asarray(jnp.sum(state.end < INF, axis=1))
            done = np.asarray(ctl.arrived) + np.asarray(ctl.segments) - running  # arrivals + runs ended
            report(min(int(done.min()), 2 * N) if live else 2 * N, 2 * N)
    return state, steps


def device_groups(policies: tuple[str, ...]) -> list[tuple[int, int]]:
    """Consecutive (first, end) row ranges, one per local device used: several rows and
    several devices split the rows evenly (rows are independent); else one range."""
    B = len(policies)
    n = min(len(jax.local_devices()), B) if jax.process_count() == 1 else 1
    bounds = np.linspace(0, B, n + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def _replay_on_devices(state, st, cfg, M, N, progress, max_segments=None):
    """`_drive` of every row, the rows split over the local devices: each share is its own
    program (its own policies) running on its own device, driven from its own thread.
    Rows never interact, so results are identical to one device."""
    groups = device_groups(cfg.policies)
    if len(groups) == 1:
        return _drive(state, st, cfg, M, N, progress, max_segments)
    slowest = SlowestShare(progress, len(groups), 2 * N)
    rowwise = ("genomes", "swords", "nwords")

    def run(g, device):
        lo, hi = groups[g]
        sub_state = jax.device_put(jax.tree.map(lambda x: x[lo:hi], state), device)
        sub_st = jax.device_put(st._replace(**{f: getattr(st, f)[lo:hi] for f in rowwise}), device)
        sub_cfg = dataclasses.replace(cfg, policies=cfg.policies[lo:hi])
        final, steps = _drive(sub_state, sub_st, sub_cfg, M, N, slowest.reporter(g), max_segments)
        return jax.tree.map(np.asarray, final), steps

    parts = on_devices(run, len(groups))
    merged = jax.tree.map(lambda *xs: np.concatenate(xs), *(p[0] for p in parts))
    return merged, max(p[1] for p in parts)


@dataclasses.dataclass(frozen=True)
class EventResult:
    """Per-(policy, trial) figures of one event-mode experiment, and the replay behind them."""

    policies: tuple[str, ...]
    trials: int
    resources: tuple[str, ...]
    rows: list[dict]  # row p * trials + t: `stats.row_stats` of policy p, trial t
    replay: Replay

    def row(self, policy: str, trial: int) -> dict:
        """The figures of one (policy, trial) row."""
        return self.rows[self.policies.index(policy) * self.trials + trial]

    def summary(self) -> dict:
        """{policy: {trials: [row figures], mean: {figure: mean over trials}}}, plain JSON types."""
        out = {}
        for p, name in enumerate(self.policies):
            rows = self.rows[p * self.trials:(p + 1) * self.trials]
            out[name] = {"mean": _mean_figures(rows, self.resources), "trials": rows}
        return out


def _flat_figures(row: dict, resources) -> dict[str, float]:
    flat = {f"utilization_{r}": row["utilization"][x] for x, r in enumerate(resources)}
    for k, v in row["latency"].items():
        flat[f"latency_{k}"] = v
    for band, lat in row.get("latency_by_band", {}).items():
        for k, v in lat.items():
            flat[f"latency_{band}_{k}"] = v
    flat.update(pending_mean=row["pending_mean"], pending_max=row["pending_max"], evictions=row["evictions"])
    return flat


def _mean_figures(rows: list[dict], resources) -> dict[str, float]:
    flats = [_flat_figures(r, resources) for r in rows]
    keys = [k for k in flats[0] if all(k in f for f in flats)]
    return {k: float(np.mean([f[k] for f in flats])) for k in keys}


def run_event(cluster: Cluster, workload: Workload, cfg: EventRunConfig,
              progress: Callable[[int, int], None] | None = None) -> EventResult:
    """Replay the workload through every policy x trial in one batched program and compute the figures.

    Args:
        cluster: the machines.
        workload: the tasks, with arrival times and durations.
        cfg: the experiment: policies, trials, seed, picker, preemption.
        progress: progress(done, total) as `replay` reports it.

    Returns:
        The EventResult: utilization, latency and queue figures per (policy, trial).

    Raises:
        InputError: a malformed cluster or workload, or bad settings.
    """
    validate(cluster, workload)
    if cfg.trials < 1:
        raise InputError(f"trials must be >= 1, got {cfg.trials}")
    policies, trials = tuple(cfg.policies), cfg.trials
    names = tuple(n for n in policies for _ in range(trials))
    keys = rng.trial_keys(cfg.seed, EXPERIMENT, trials)
    keys = jnp.concatenate([keys] * len(policies))
    check_policies(policies, cluster, workload)
    genomes = row_genomes(names, cfg.genome)
    program = EventConfig(policies=names, sample_k=cfg.sample_k, preempt=cfg.preempt,
                          slot=slot_vector(cfg.slot, cluster.num_resources))
    rep = replay(cluster, workload, program, keys, genomes, cfg.max_evictions, progress)
    arrival = np.asarray(workload.arrival, np.float64)
    rows = []
    for b in range(len(names)):
        stats = row_stats(rep.segments[b], rep.first_start[b], arrival, np.asarray(workload.priority),
                          np.asarray(workload.demand), np.asarray(cluster.capacity), rep.inputs.tick_s, cfg.preempt)
        stats["evictions"] = int(rep.evictions[b])
        rows.append(stats)
    return EventResult(policies=policies, trials=trials, resources=tuple(cluster.resources), rows=rows,
                       replay=rep)
