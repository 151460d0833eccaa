"""Paper-ready figures: the report's charts as PDF, PNG or SVG files through matplotlib.

matplotlib is an optional extra (`pip install 'jaxsched[figures]'`); only `jaxsched report
--figures DIR` needs it.
"""

from __future__ import annotations

import os
import re

from .errors import InputError
from .report import PALETTE, Chart, report_sections

FORMATS = ("pdf", "png", "svg")


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise InputError("--figures needs matplotlib, an optional extra: pip install 'jaxsched[figures]'") from None
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def figure_name(section: str, chart: Chart) -> str:
    """The file name (without extension) of a chart: its result file's stem and its title, in
    lowercase letters, digits and underscores."""
    slug = lambda t: re.sub(r"[^a-z0-9]+", "_", t.lower()).strip("_")
    return f"{slug(os.path.splitext(section)[0])}__{slug(chart.title)}"


def draw(chart: Chart, plt):
    """A matplotlib figure of one Chart (series, min-max bands, the zoom's x range)."""
    fig, ax = plt.subplots(figsize=(6.0, 3.6), layout="constrained")
    inside = lambda x: chart.xlim is None or chart.xlim[0] <= x <= chart.xlim[1]
    for n, (name, (xs, ys)) in enumerate(chart.series.items()):
        color = PALETTE[n % len(PALETTE)]
        pts = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None and inside(x)]
        if name in chart.bands:
            band = [(x, a, b) for x, a, b in zip(*chart.bands[name]) if None not in (x, a, b) and inside(x)]
            if band:
                bx, lo, hi = zip(*band)
                ax.fill_between(bx, lo, hi, color=color, alpha=0.15, linewidth=0)
        if pts:
            ax.plot(*zip(*pts), color=color, linewidth=1.5, label=name)
    if chart.logx:
        ax.set_xscale("log")
    if chart.xlim is not None:
        ax.set_xlim(*chart.xlim)
    ax.set(title=chart.title, xlabel=chart.xlabel, ylabel=chart.ylabel)
    ax.grid(alpha=0.3)
    if chart.series:
        ax.legend(fontsize="small", frameon=False, loc="best")
    return fig


def write_figures(paths: list[str], directory: str, formats: tuple[str, ...] = FORMATS,
                  progress=None) -> list[str]:
    """Write every chart of the report of these result files into `directory`, once per format:
    the files written.

    Raises:
        InputError: a bad result file, an unknown format, matplotlib missing, or a file that
            cannot be written (each named).
    """
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise InputError(f"--figure-formats: {', '.join(bad) or 'none given'}: choose from {', '.join(FORMATS)}")
    sections = report_sections(paths)
    charts = [(figure_name(name, part), part) for name, parts in sections for part in parts if isinstance(part, Chart)]
    plt = _pyplot()
    os.makedirs(directory, exist_ok=True)
    written = []
    for stem, chart in charts:
        fig = draw(chart, plt)
        try:
            for fmt in formats:
                path = os.path.join(directory, f"{stem}.{fmt}")
                tmp = os.path.join(directory, f".{stem}.{fmt}.tmp")
                try:
                    fig.savefig(tmp, format=fmt, dpi=200)
                    os.replace(tmp, path)
                except OSError as e:
                    if os.path.exists(tmp):
                        os.remove(tmp)
                    raise InputError(f"{path}: cannot write the figure ({e.strerror or e})") from None
                written.append(path)
        finally:
            plt.close(fig)
        if progress is not None:
            progress(len(written) // len(formats), len(charts))
    return written
