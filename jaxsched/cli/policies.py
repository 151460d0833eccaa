"""`jaxsched policies`: the registered policies, by family."""

from __future__ import annotations

import argparse


HELP = "list the registered policies"


def run(args: argparse.Namespace) -> int:
    """Print the registered policies by family."""
    from ..policies import FAMILY, REGISTRY

    for p in list(REGISTRY.values()) + [FAMILY]:
        print(f"{p.family:14s} {p.name}")
    return 0
