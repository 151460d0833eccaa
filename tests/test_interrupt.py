"""Ctrl-C: honoured within about a second, between compiled calls, on every device share;
exit 130, `jaxsched: interrupted`, no result file. Pacing the calls changes no result."""

import os
import signal
import subprocess
import sys
import threading
import time

import jax
import numpy as np
import pytest

from jaxsched import event, interrupt, rng
from jaxsched.devices import Background, on_devices
from jaxsched.errors import InputError
from jaxsched.event import run as event_run
from jaxsched.types import Cluster, Workload


def test_a_failing_share_stops_the_others_and_its_own_error_is_raised():
    assert len(jax.local_devices()) >= 2
    started = threading.Event()
    seen = []

    def share(i, device):
        if i == 0:  # long work, checking between its "calls"
            started.set()
            for _ in range(2000):
                time.sleep(0.01)
                seen.append(i)
                interrupt.checkpoint()
            return "finished"
        started.wait(5)
        raise InputError("share 1 is bad")

    t = time.perf_counter()
    with pytest.raises(InputError, match="share 1 is bad"):
        on_devices(share, 2)
    assert time.perf_counter() - t < 5 and len(seen) < 2000  # share 0 did not run its 20 s
    interrupt.checkpoint()  # the main thread is not bound to the stopped call
    assert on_devices(lambda i, d: i * 10, 2) == [0, 10]  # a later call runs as usual


def test_a_called_off_thread_is_not_waited_for():
    release = threading.Event()
    work = Background(lambda: release.wait(10))  # a long call with no checkpoint in it
    t = time.perf_counter()
    work.cancel()
    assert time.perf_counter() - t < 1 and work.future.running()
    release.set()
    assert work.future.result(5) is True


def test_the_pacer_aims_at_the_target_time_within_its_bounds():
    pacer = interrupt.Pacer(64, least=16, most=1024)
    sizes = []
    for _ in range(6):
        sizes.append(pacer.start())
        time.sleep(interrupt.TARGET_CALL_S / 64)  # a call far shorter than the target: grow, 4x at most
        pacer.done()
    assert sizes == [64, 256, 1024, 1024, 1024, 1024]
    pacer.start()
    time.sleep(3 * interrupt.TARGET_CALL_S)
    pacer.done()
    assert pacer.size < 1024 / 2


def test_a_replay_split_into_calls_of_any_size_gives_the_same_result(monkeypatch):
    rs = np.random.default_rng(3)
    N = 300
    cluster = Cluster(np.ones((8, 2), np.float32))
    wl = Workload(demand=rs.uniform(0.05, 0.5, (N, 2)).astype(np.float32), priority=rs.integers(0, 12, N),
                  arrival=np.sort(rs.uniform(0, 200, N)), duration=rs.uniform(5, 60, N))
    cfg, keys = event.EventConfig(("best_fit", "random"), preempt=True), rng.trial_keys(0, "event", 2)
    paced = event.replay(cluster, wl, cfg, keys)
    monkeypatch.setattr(event_run, "STEPS_PER_CALL", 3)
    monkeypatch.setattr(event_run, "MAX_STEPS_PER_CALL", 3)
    calls, jit = [], event_run._run_jit
    monkeypatch.setattr(event_run, "_run_jit", lambda *a, **k: calls.append(1) or jit(*a, **k))
    small = event.replay(cluster, wl, cfg, keys)
    assert len(calls) >= paced.steps // 3
    assert small.steps == paced.steps and np.array_equal(small.first_start, paced.first_start)
    assert all(np.array_equal(a, b) for a, b in zip(small.segments, paced.segments))
    assert np.array_equal(small.evictions, paced.evictions)


def _interrupt_when_busy(args, tmp_path, marker):
    """Run `python -m jaxsched ARGS` off a terminal, send SIGINT once its first progress line
    (`marker`) shows the work under way: (seconds from SIGINT to exit, exit code, stderr)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("CI", None)
    # SIGINT at its default in the child, as on a terminal: a shell that starts the tests in the
    # background (`pytest &`) passes it on ignored, and Python then installs no handler for it.
    # A handler (unlike "ignored") is reset to the default in the child.
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "jaxsched", "--cpu-devices", "2", *args], env=env,
                                cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line)
            if line.startswith(marker):
                break
        assert proc.poll() is None, "".join(lines)
        sent = time.perf_counter()
        proc.send_signal(signal.SIGINT)
        rest = proc.communicate(timeout=120)[1]
        return time.perf_counter() - sent, proc.returncode, "".join(lines) + rest
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("command, marker", [
    # two policies on two devices: each share in a thread of its own
    (["event", "--machines", "1000", "--rho", "0.8", "--policy", "best_fit,alpha_evolve", "--trials", "2"],
     "replaying:"),
    # CvxCluster's rounds in a thread of their own beside the scoring replay
    (["event", "--machines", "300", "--rho", "1.2", "--policy", "best_fit,cvxcluster"], "cvxcluster rounds:"),
    # the same while the scoring replay still compiles (a call no checkpoint can end)
    (["--no-compile-cache", "event", "--machines", "300", "--rho", "1.2", "--policy", "best_fit,cvxcluster"],
     "cvxcluster rounds:"),
    # the full scan's blocks, dispatched ahead of their results
    (["snapshot", "--machines", "40000", "--rho", "0.9", "--policy", "all", "--trials", "2", "--sample-k", "0",
      "--no-compaction", "--no-inflation"], "packing:"),
])
def test_ctrl_c_ends_a_long_run_within_two_seconds_and_writes_nothing(tmp_path, command, marker):
    took, code, err = _interrupt_when_busy(command + ["--json", "out.json"], tmp_path, marker)
    assert code == 130, err
    assert err.rstrip().endswith("jaxsched: interrupted") and "Traceback" not in err
    assert took < 2.5, f"exited {took:.1f} s after SIGINT"
    assert os.listdir(tmp_path) == []  # neither the result nor a temporary file
