"""Progress output: drawn on a terminal, silent in CI and in pipes."""

import io

from jaxsched import progress


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_enabled_only_on_a_terminal_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert progress.enabled(FakeTTY())
    assert not progress.enabled(io.StringIO())  # a pipe or a file
    monkeypatch.setenv("CI", "true")
    assert not progress.enabled(FakeTTY())


def test_off_a_terminal_an_early_estimate_then_a_line_every_interval(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", out)
    clock = iter([0.0, 2.0, 5.0, 12.0, 15.0, 25.0, 30.0])
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(clock))
    bar = progress.maybe("packing")  # start at 0 s
    # at 2 s (too soon for an estimate), 5 s (the first line), 12 s (too soon), 15 s and 25 s (lines)
    for done in (4, 10, 30, 40, 50):
        bar(done, 100)
    bar(100, 100)  # done: no line
    lines = out.getvalue().splitlines()
    assert lines == ["packing: 10/100 (10.0%) after 5 s, about 45 s left",
                     "packing: 40/100 (40.0%) after 15 s, about 22 s left",
                     "packing: 50/100 (50.0%) after 25 s, about 25 s left"]
    assert "\r" not in out.getvalue()


def test_no_line_for_work_that_ends_within_a_line_interval(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", out)
    clock = iter([0.0, 4.0, 6.0])
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(clock))
    bar = progress.maybe("packing")
    bar(50, 100)  # 4 s for half: about 4 s left, not worth a line
    bar(100, 100)
    assert out.getvalue() == ""


def test_short_work_off_a_terminal_prints_nothing(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", out)
    bar = progress.maybe("packing")
    bar(1, 2)
    bar(2, 2)
    ticker = progress.Ticker("compaction", "round")
    ticker(3)
    ticker.close()
    assert out.getvalue() == ""


def test_bar_redraws_one_line_and_ends_it():
    out = FakeTTY()
    bar = progress.Progress("packing", stream=out)
    bar(5, 10)
    bar(10, 10)
    text = out.getvalue()
    assert text.startswith("\rpacking [###############               ] 5/10")
    assert "10/10" in text and text.endswith("\n") and text.count("\n") == 1


def test_the_estimate_follows_the_recent_pace(monkeypatch):
    """A replay slows as its queue grows: the time left comes from the last third of the run (at
    least 30 s), not from its average pace since the start."""
    out = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", out)
    clock = iter([0.0, 100.0, 150.0, 200.0, 210.0])
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(clock))
    bar = progress.maybe("replaying")
    for done in (50, 55, 60, 61):  # 0.5 tasks/s for 100 s, then 0.1 tasks/s
        bar(done, 100)
    lines = out.getvalue().splitlines()
    # at 100 s the whole run is the window (50 in 100 s); at 150 s the window starts at 100 s
    # (55 - 50 in 50 s); at 200 s too (the last third starts at 133 s: 60 - 50 in 100 s); the
    # average since the start would say 133 s at 200 s
    assert lines == ["replaying: 50/100 (50.0%) after 100 s, about 100 s left",
                     "replaying: 55/100 (55.0%) after 150 s, about 450 s left",
                     "replaying: 60/100 (60.0%) after 200 s, about 400 s left",
                     "replaying: 61/100 (61.0%) after 210 s, about 390 s left"]
