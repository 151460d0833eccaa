"""`jaxsched report`: one self-contained HTML page of result files."""

from __future__ import annotations

import argparse
import os

from .common import check_writable
from .config import UsageError


HELP = "a self-contained HTML page comparing the policies of result files"
DESCRIPTION = ("Render JSON results (snapshot, event, evolve, tune, cvx, gpushare, results/bench.json) and"
               " event utilization CSVs as one HTML page: sortable tables, SVG plots, definitions; no "
               "network needed to view it. --figures DIR also writes each plot as PDF, PNG and SVG files "
               "through matplotlib (the optional extra jaxsched[figures]).")


def add_arguments(p) -> None:
    """The positional arguments and flags beyond the shared ones."""
    p.add_argument("files", nargs="+", metavar="FILE", help="result files (*.json, PREFIX_<policy>.csv)")
    p.add_argument("-o", "--output", default="report.html", metavar="FILE", help="the page (default: report.html)")
    p.add_argument("--figures", metavar="DIR", help="also write every plot into DIR as paper-ready files "
                   "(matplotlib; pip install 'jaxsched[figures]')")
    p.add_argument("--figure-formats", default="pdf,png,svg", metavar="LIST",
                   help="the formats --figures writes, comma-separated from pdf, png, svg (default: all three)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")


def _check_figures(args) -> tuple[str, ...]:
    """--figures DIR and --figure-formats, checked before anything is written: the formats."""
    from ..errors import InputError
    from ..figures import check_formats, pyplot

    try:
        formats = check_formats(args.figure_formats)
        if os.path.exists(args.figures) and not os.path.isdir(args.figures):
            raise InputError(f"--figures: {args.figures} exists and is not a directory")
        pyplot()
    except InputError as e:
        raise UsageError(str(e)) from None
    try:
        os.makedirs(args.figures, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--figures: cannot create {args.figures} ({e.strerror or e})") from None
    check_writable(os.path.join(args.figures, "figure.pdf"), "--figures")
    return formats


def run(args: argparse.Namespace) -> int:
    """Write the HTML report of the given result files (and its plots as files with --figures)."""
    from ..figures import write_figures
    from ..output import write_text_atomic
    from ..report import build_report, report_sections

    check_writable(args.output, "-o")
    formats = _check_figures(args) if args.figures else ()
    sections = report_sections(args.files)  # read once, for the page and the figures
    write_text_atomic(args.output, build_report(args.files, sections))
    if not args.quiet:
        print(f"wrote {args.output}")
    if args.figures:
        written = write_figures(args.files, args.figures, formats, sections)
        if not args.quiet:
            print(f"wrote {len(written)} figure file(s) into {args.figures}")
    return 0
