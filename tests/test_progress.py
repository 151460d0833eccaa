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


def test_maybe_gives_nothing_off_a_terminal(monkeypatch):
    monkeypatch.setattr(progress.sys, "stderr", io.StringIO())
    assert progress.maybe("packing") is None


def test_bar_redraws_one_line_and_ends_it():
    out = FakeTTY()
    bar = progress.Progress("packing", stream=out)
    bar(5, 10)
    bar(10, 10)
    text = out.getvalue()
    assert text.startswith("\rpacking [###############               ] 5/10")
    assert "10/10" in text and text.endswith("\n") and text.count("\n") == 1
