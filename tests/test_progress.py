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


def test_off_a_terminal_a_line_every_interval_with_the_time_left(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", out)
    clock = iter([0.0, 5.0, 12.0, 15.0, 25.0, 30.0])
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(clock))
    bar = progress.maybe("packing")  # start at 0 s
    for done in (10, 30, 40, 50):  # at 5 s (too soon), 12 s (a line), 15 s (too soon), 25 s (a line)
        bar(done, 100)
    bar(100, 100)  # done: no line
    lines = out.getvalue().splitlines()
    assert lines == ["packing: 30/100 (30.0%) after 12 s, about 28 s left",
                     "packing: 50/100 (50.0%) after 25 s, about 25 s left"]
    assert "\r" not in out.getvalue()


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
