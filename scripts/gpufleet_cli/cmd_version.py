"""``gpufleet version``."""

from __future__ import annotations

from .common import version_string


def register(sub) -> None:
    p = sub.add_parser(
        "version",
        help="print gpufleet's and ansible-core's versions",
        description="Print gpufleet's version and the ansible-core it runs on.",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    print(version_string())
    return 0
