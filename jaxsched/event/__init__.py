"""Event mode: a discrete-event replay of an arrival stream, every policy in one JAX loop.

Semantics (docs/event.md; tests/reference_event.py is the plain Python reading of the same
rules):

- Time is integer ticks (`tick_s` seconds each, the finest of 1 ms, 10 ms, 0.1 s, 1 s
  that keeps every arrival + duration below 2^30 ticks). Tasks are numbered in arrival
  order (ties by their index in the workload).
- Events are processed one at a time: the earliest completion or arrival, completions
  first at equal times, then the lowest task number.
- An arrival is tried at once: sample_k draws with the full-scan fallback (or a full scan).
  A task that fits nowhere joins the pending queue.
- A completion frees its task's resources and then drains the pending queue: entries in
  FIFO order, those whose demand exceeds the maximum free per dimension at the drain's
  start skipped without scoring, the rest tried with sample_k draws and *no* fallback (a
  full scan when sample_k = 0). A placed task runs for its remaining duration.
- Preemption: the queue drains the production band (priority >= 9) first, then the
  middle band (2-8), then free (0-1), FIFO within a band. An arriving production task that
  fits nowhere may evict tasks of priority < 9: among machines where it fits once all of
  their evictable tasks are gone, the one with the least shortfall sum_r max(0, d_r - f_r)
  (lowest index among ties); victims on it go lowest priority first, then largest
  (d_cpu + d_mem + ..., every dimension; docs/event.md says why), then lowest task number,
  until the task fits. Victims re-queue and later resume their remaining duration. Production is never evicted.
- Draws: attempt n of task i (every try counts, from 0) uses the counter-hash step
  i + n * N of its trial's stream, so every policy sees the same draws for the same try.

The engine keeps every (policy, trial) row in fixed-size arrays (running tasks by task
number with a two-level minimum over end times, the queue as an append-only log with
compaction, a log of run segments) and masks instead of data-dependent shapes. The
costly paths (full-scan fallback, queue drain, eviction) run under a conditional on
whether any row needs them; a drain skips the tries certain to fail (`drain`). The host
turns the run segments into the reported figures (`stats`).

Modules: `config` (the replay program and the experiment), `inputs` (the workload in
ticks, bands, demand classes), `state` (the carry), `placement` (draws, scans, evictions),
`drain` (certificates and the drain's list), `step` (one step of every row), `run` (the
loop, the device split, the result), `stats` (the figures), `rounds` (CvxCluster rows:
allocation rounds on the same clock, on the host).
"""

from .config import EXPERIMENT, EventConfig, EventRunConfig
from .inputs import BANDS, INF, PRODUCTION, EventInputs, band_of, choose_tick, demand_classes, prepare
from .run import EventResult, Replay, device_groups, replay, run_event
from .state import EventState

__all__ = [
    "BANDS", "EXPERIMENT", "EventConfig", "EventInputs", "EventResult", "EventRunConfig", "EventState", "INF",
    "PRODUCTION", "Replay", "band_of", "choose_tick", "demand_classes", "device_groups", "prepare", "replay",
    "run_event",
]
