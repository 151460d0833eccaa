"""`jaxsched policies`: the registered policies, by family (with a --policy-file's, if given)."""

from __future__ import annotations

import argparse

from .config import resolve
from .options import POLICY_FILE

HELP = "list the registered policies"
OPTIONS = (POLICY_FILE.but(help="also list the user policies this Python file registers"),)


def run(args: argparse.Namespace) -> int:
    """Print the registered policies by family; a user policy's parameters beside it."""
    from ..policies import FAMILY, REGISTRY, USER_POLICIES
    from .workloads import user_policies

    s, _ = resolve(args, "policies", OPTIONS)
    user_policies(s)
    for p in list(REGISTRY.values()) + [FAMILY] + list(USER_POLICIES.values()):
        params = ", ".join(f"{n}={v:g}" for n, v in zip(p.param_names, p.params))
        print(f"{p.family:14s} {p.name}" + (f" ({params})" if params else ""))
    return 0
