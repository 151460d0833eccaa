"""Configuration of event mode: the replay program's static settings and the experiment's.

`EventConfig` is what one compiled replay program depends on (one compile per value);
`EventRunConfig` is what `run_event` takes: the policies, trials and seed of an experiment.
"""

from __future__ import annotations

import dataclasses

from ..packing import PackConfig

EXPERIMENT = "event"


@dataclasses.dataclass(frozen=True)
class EventConfig:
    """Static configuration of one replay program (hashable; one compile per value).

    The engine knobs size the units of a drain's work; they change how fast a replay runs,
    never what it computes (the tests run small values against the reference).
    """

    policies: tuple[str, ...]  # one name per row; rows of one name are consecutive
    sample_k: int = 0  # 0: full scans; K > 0: K draws per try, with a full-scan fallback for arrivals
    preempt: bool = False  # priority bands in the queue, and production tasks may evict
    slot: tuple[float, ...] = (0.05, 0.05)
    queue_window: int = 128  # drain candidates examined (and tried together) per drain step
    full_scan_window: int = 8  # the same with full scans (sample_k = 0), each a pass over all machines
    list_ahead: int = 4  # a drain lists this many windows of candidates ahead at a time
    group_blocks: int = 64  # bitmap blocks read per inner iteration of a drain's listing
    max_live: int = 64  # live classes a drain lists through the bitmaps; with more, it reads the whole queue
    pass_chunk: int = 4096  # queue entries per iteration of a listing that reads the whole queue

    def pack_config(self) -> PackConfig:
        """The packing configuration whose policies score this replay's rows."""
        return PackConfig(policies=self.policies, sample_k=self.sample_k, slot=self.slot)

    @property
    def window(self) -> int:
        """Drain candidates tried per drain step."""
        return self.queue_window if self.sample_k > 0 else self.full_scan_window


@dataclasses.dataclass(frozen=True)
class EventRunConfig:
    """An event-mode experiment: every policy replayed over `trials` random streams.

    "cvxcluster" among the policies adds CvxCluster rows (`rounds`): allocation rounds every
    `cvx_round_s` seconds, one row set per utility weighting of the priority bands.

    Trial t of every policy uses the key of (seed, "event", t), so that all policies see
    the same draws for the same try (common random numbers).
    """

    policies: tuple[str, ...]  # distinct policy names
    trials: int = 1
    seed: int = 1
    sample_k: int = 64
    preempt: bool = False
    slot: tuple[float, ...] | None = None  # None: 0.05 on CPU and memory
    genome: tuple[float, ...] | None = None  # w0..w5, p1, p2 of `family` rows (default alpha_evolve's point)
    max_evictions: int | None = None  # room in the segment log (default: the task count); more is an error
    cvx_round_s: float = 1.0  # "cvxcluster" rows: simulated seconds between allocation rounds
    cvx_band_weights: tuple[tuple[float, float, float], ...] = ((1.0, 2.0, 4.0),)  # one row set per weighting
