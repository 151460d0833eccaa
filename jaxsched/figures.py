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


def check_formats(formats) -> tuple[str, ...]:
    """The formats of a comma-separated text or a sequence, each one of FORMATS; else InputError."""
    items = formats.split(",") if isinstance(formats, str) else formats
    out = tuple(f.strip().lower() for f in items if f.strip())
    bad = [f for f in out if f not in FORMATS]
    if bad or not out:
        raise InputError(f"--figure-formats: {', '.join(bad) or 'none given'}: choose from {', '.join(FORMATS)}")
    return out


def pyplot():
    """matplotlib's pyplot on its file-only backend; InputError saying how to install it if absent."""
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
    series, bands = chart.visible()
    for n, (name, pts) in enumerate(series.items()):
        color = PALETTE[n % len(PALETTE)]
        if bands.get(name):
            bx, lo, hi = zip(*bands[name])
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


def write_figures(paths: list[str], directory: str, formats=FORMATS,
                  sections: list[tuple[str, list]] | None = None) -> list[str]:
    """Write every chart of the report of these result files into `directory`, once per format:
    the files written. `sections`: their `report.report_sections`, where already read.

    Raises:
        InputError: a bad result file, an unknown format, matplotlib missing, or a file that
            cannot be written (each named).
    """
    formats = check_formats(formats)
    sections = report_sections(paths) if sections is None else sections
    charts = [(figure_name(name, part), part) for name, parts in sections for part in parts if isinstance(part, Chart)]
    plt = pyplot()
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
    return written
