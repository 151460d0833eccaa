"""Running a replay: the compiled loop of steps, its rows split over the local devices, and
the figures of an experiment computed from the run segments on the host."""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import interrupt, rng
from ..devices import Background, SlowestShare, on_devices
from ..errors import InputError
from ..packing import PAD_CAPACITY
from ..policies import genome_width, row_genomes, safe_inverse, slot_vector
from ..user_policies import check_policies
from ..types import Cluster, Workload, validate
from . import rounds
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
    done counting the arrivals and finished tasks of the share's slowest row. Calls are paced to about
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
            # arrivals + tasks finished: an evicted run's end is no progress (the task runs again)
            done = np.asarray(ctl.arrived) + np.asarray(ctl.segments) - running - np.asarray(ctl.evictions)
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
    # Wall-clock figures (they alone differ between runs of one seed): scoring_s and cvxcluster_s,
    # the two parts' wall time (they run at once), and per CvxCluster row its trials' round times.
    timing: dict = dataclasses.field(default_factory=dict)

    def row(self, policy: str, trial: int) -> dict:
        """The figures of one (policy, trial) row."""
        return self.rows[self.policies.index(policy) * self.trials + trial]

    def summary(self) -> dict:
        """{policy: {trials: [row figures], mean: {figure: mean over trials}}}, plain JSON types."""
        out = {}
        for p, name in enumerate(self.policies):
            rows = self.rows[p * self.trials:(p + 1) * self.trials]
            out[name] = {"mean": _mean_figures(rows, self.resources), "trials": rows}
            if "cvx" in rows[0]:  # CvxCluster rows: their rounds' figures, means over trials
                out[name]["cvx"] = _mean_numbers([r["cvx"] for r in rows])
        return out


def _mean_numbers(dicts: list[dict]) -> dict:
    """The first dict with each number replaced by its mean over all of them."""
    return {k: float(np.mean([d[k] for d in dicts])) if isinstance(v, (int, float)) and not isinstance(v, bool)
            else v for k, v in dicts[0].items()}


def timing_summary(timing: dict) -> dict:
    """`EventResult.timing` with each CvxCluster row's round times averaged over its trials."""
    out = {k: v for k, v in timing.items() if k != "cvxcluster"}
    if "cvxcluster" in timing:
        out["cvxcluster"] = {name: _mean_numbers(t) for name, t in timing["cvxcluster"].items()}
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


def row_names(cfg: EventRunConfig) -> tuple[str, ...]:
    """The experiment's row sets in order: each scoring policy, and in the place of "cvxcluster"
    one name per band weighting (`rounds.row_name`)."""
    several = len(cfg.cvx_band_weights) > 1
    out = []
    for p in cfg.policies:
        out += [rounds.row_name(w, several) for w in cfg.cvx_band_weights] if p == rounds.METHOD else [p]
    return tuple(out)


def run_event(cluster: Cluster, workload: Workload, cfg: EventRunConfig,
              progress: Callable[[int, int], None] | None = None,
              round_progress: Callable[[int, int], None] | None = None) -> EventResult:
    """Replay the workload through every policy x trial and compute the figures: the scoring
    policies in one batched program, CvxCluster rows in allocation rounds on the same ticks.

    Args:
        cluster: the machines.
        workload: the tasks, with arrival times and durations.
        cfg: the experiment: policies, trials, seed, picker, preemption, CvxCluster's rounds.
        progress: progress(done, total) of the scoring rows, as `replay` reports it.
        round_progress: progress(done, total) of the CvxCluster rows, all of them together.

    Returns:
        The EventResult: utilization, latency and queue figures per (policy, trial); CvxCluster
        rows add their rounds' figures under "cvx".

    Raises:
        InputError: a malformed cluster or workload, or bad settings.
    """
    validate(cluster, workload)
    if cfg.trials < 1:
        raise InputError(f"trials must be >= 1, got {cfg.trials}")
    trials = cfg.trials
    scoring = tuple(p for p in cfg.policies if p != rounds.METHOD)
    weightings = [tuple(float(x) for x in w) for w in cfg.cvx_band_weights] if rounds.METHOD in cfg.policies else []
    policies = row_names(cfg)
    inputs = prepare(workload, cfg.preempt)
    rounds.check_settings(cfg.cvx_round_s, weightings, inputs.tick_s)
    arrival = np.asarray(workload.arrival, np.float64)
    figures = lambda seg, first: row_stats(seg, first, arrival, np.asarray(workload.priority),
                                           np.asarray(workload.demand), np.asarray(cluster.capacity),
                                           inputs.tick_s, by_band=True)
    rows_of = {}  # name -> its trials' (figures, segments, first starts, evictions, drain draws, certain)
    timing = {}  # wall-clock figures, the only ones that differ between runs of one seed

    def cvx_rows():  # CvxCluster's rows, one weighting and trial after the other
        t0 = time.perf_counter()
        keys = rng.trial_keys(cfg.seed, rounds.EXPERIMENT, trials)
        out = []
        for x, w in enumerate(weightings):
            for t in range(trials):
                k = x * trials + t
                report = None if round_progress is None else (
                    lambda d, n, k=k: round_progress(k * n + d, len(weightings) * trials * n))
                row = rounds.replay_rounds(cluster, workload, inputs, w, keys[t], cfg.cvx_round_s, progress=report)
                name = rounds.row_name(w, len(weightings) > 1)
                stats = dict(figures(row.segments, row.first_start), evictions=0)
                stats["cvx"] = dict(row.log.figures(), band_weights=list(w), round_s=cfg.cvx_round_s, eviction="none")
                timing.setdefault("cvxcluster", {}).setdefault(name, []).append(row.log.timing())
                out.append((name, (stats, row.segments, row.first_start, 0, 0, 0)))
        timing["cvxcluster_s"] = time.perf_counter() - t0
        return out

    names = tuple(n for n in scoring for _ in range(trials))
    if scoring:
        check_policies(scoring, cluster, workload)
        genomes = row_genomes(names, cfg.genome)
        program = EventConfig(policies=names, sample_k=cfg.sample_k, preempt=cfg.preempt,
                              slot=slot_vector(cfg.slot, cluster.num_resources))

    def scoring_rows():
        t0 = time.perf_counter()
        keys = jnp.concatenate([rng.trial_keys(cfg.seed, EXPERIMENT, trials)] * len(scoring))
        rep = replay(cluster, workload, program, keys, genomes, cfg.max_evictions, progress, inputs)
        timing["scoring_s"] = time.perf_counter() - t0
        return rep

    # The rounds are host-bound and mostly single-threaded: they run in a thread of their own
    # beside the scoring rows' replay (rows are independent: the results are the same). Both
    # parts then run in threads, so that Ctrl-C reaches the main thread while it only waits,
    # never inside JAX's own code, whose locks the other part still needs.
    beside = Background(cvx_rows) if weightings and scoring else None
    steps = 0
    if scoring:
        try:
            rep = Background(scoring_rows).result() if beside is not None else scoring_rows()
        except BaseException:
            if beside is not None:
                beside.cancel()
            raise
        steps = rep.steps
        for b, name in enumerate(names):
            stats = dict(figures(rep.segments[b], rep.first_start[b]), evictions=int(rep.evictions[b]))
            rows_of.setdefault(name, []).append((stats, rep.segments[b], rep.first_start[b], rep.evictions[b],
                                                 rep.drain_draws[b], rep.drain_certain[b]))
    if weightings:
        for name, entry in (beside.result() if beside is not None else cvx_rows()):
            rows_of.setdefault(name, []).append(entry)
    entries = [e for name in policies for e in rows_of[name]]
    rows = [e[0] for e in entries]
    merged = Replay(inputs=inputs, segments=[e[1] for e in entries], first_start=np.stack([e[2] for e in entries]),
                    evictions=np.asarray([e[3] for e in entries], np.int64), steps=steps,
                    drain_draws=np.asarray([e[4] for e in entries], np.int64),
                    drain_certain=np.asarray([e[5] for e in entries], np.int64))
    return EventResult(policies=policies, trials=trials, resources=tuple(cluster.resources), rows=rows,
                       replay=merged, timing=timing)
