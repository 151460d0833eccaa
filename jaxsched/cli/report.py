"""`jaxsched report`: one self-contained HTML page of result files."""

from __future__ import annotations

import argparse

from .common import check_writable


HELP = "a self-contained HTML page comparing the policies of result files"
DESCRIPTION = ("Render JSON results (snapshot, event, evolve, tune, cvx, results/bench.json) and event"
               " utilization CSVs as one HTML page: sortable tables, SVG plots, definitions; no "
               "network needed to view it.")


def add_arguments(p) -> None:
    """The positional arguments and flags beyond the shared ones."""
    p.add_argument("files", nargs="+", metavar="FILE", help="result files (*.json, PREFIX_<policy>.csv)")
    p.add_argument("-o", "--output", default="report.html", metavar="FILE", help="the page (default: report.html)")


def run(args: argparse.Namespace) -> int:
    """Write the HTML report of the given result files."""
    from ..output import write_text_atomic
    from ..report import build_report

    check_writable(args.output, "-o")
    write_text_atomic(args.output, build_report(args.files))
    print(f"wrote {args.output}")
    return 0
