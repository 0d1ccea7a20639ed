# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Resolve an upstream version to the exact package version a repository offers.

The brief pins upstream versions (driver 580.159.04, NCCL 2.27.7 for CUDA 12.9); the repositories add a
revision of their own that no rule predicts (NVIDIA's Ubuntu driver packages alternate between
``-0ubuntu1`` and ``-1ubuntu1`` from release to release, a package may be re-spun as ``-2``). So the
version installed is the one the repository offers whose upstream part is the pin, and whose text carries
the required part (``+cuda12.9`` for NCCL), asked on the host:

* Debian and Ubuntu: ``apt-cache madison <names>`` (gpufleet.cluster.pinned_packages);
* Red Hat: ``dnf --showduplicates list --available <names>`` (the roles' setup-RedHat.yml, through the
  gpufleet.cluster.dnf_resolve filter).

Exactly one match is the version to install and hold; none or several is an error before anything is
changed, listing what the repository does offer.
"""

from __future__ import annotations

import re


class ResolveError(ValueError):
    """No version, or more than one, of a package matches its pin."""


def strip_epoch(version: str) -> str:
    """``1:4.2.3-1`` -> ``4.2.3-1``; a version without an epoch is returned as is."""
    head, sep, tail = version.partition(":")
    return tail if sep and head.isdigit() else version


def matches(version: str, upstream: str, contains: str = "") -> bool:
    """Whether a repository's version is the upstream release ``upstream`` (any revision) and carries ``contains``.

    The upstream part is compared whole: ``580.159.04`` matches ``580.159.04-1ubuntu1`` and
    ``580.159.04-1.el9`` but neither ``580.159.041-1`` nor ``580.159.04.1-1``. An epoch on the repository's
    version is ignored unless the pin gives one itself (``1:4.2.3``).
    """
    candidate = version if ":" in upstream else strip_epoch(version)
    if not (candidate == upstream or candidate.startswith(upstream + "-")):
        return False
    return contains in candidate if contains else True


def pick(name: str, offered: list[str], upstream: str, contains: str = "") -> str:
    """The one version of ``offered`` matching the pin; ResolveError naming the package and what is offered."""
    found = list(dict.fromkeys(v for v in offered if matches(v, upstream, contains)))
    if len(found) == 1:
        return found[0]
    wanted = upstream + (f"-*{contains}*" if contains else "-*")
    listed = ", ".join(dict.fromkeys(offered)) or "none"
    if not found:
        raise ResolveError(f"{name}: no version matches {wanted}; the repositories offer {listed}")
    raise ResolveError(f"{name}: {len(found)} versions match {wanted} ({', '.join(found)}): the pin is ambiguous")


def parse_madison(text: str) -> dict[str, list[str]]:
    """``apt-cache madison`` lines -> package -> versions offered, in apt's order, without duplicates.

    Each line is ``<package> | <version> | <archive URI> <component> Packages`` (apt's cmdline/apt-cache.cc,
    Madison(): ``setw(10) << pkg << " | " << setw(10) << version << " | " << index description``); a
    version served by two sources, or for two architectures, is listed once per source. ``Sources`` lines
    (deb-src entries) are not installable versions and are skipped.
    """
    offered: dict[str, list[str]] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) < 3 or not parts[0] or not parts[1]:
            continue
        if parts[2].endswith(" Sources"):
            continue
        versions = offered.setdefault(parts[0], [])
        if parts[1] not in versions:
            versions.append(parts[1])
    return offered


# dnf prints "Installed Packages" / "Available Packages" headings and a metadata line before them
# ("Last metadata expiration check: ..."); the package rows are "<name>.<arch>  <[epoch:]version-release>
# <repo>", and a name.arch wider than its column is printed on a line of its own with the version and
# repository on the next (dnf/cli/output.py, Output.fmtColumns and simpleList, dnf 4 on RHEL and Rocky 9).
_ARCHES = ("x86_64", "aarch64", "noarch", "i686", "ppc64le", "s390x", "src")
_NAME_ARCH = re.compile(r"^(?P<name>\S+)\.(?P<arch>" + "|".join(_ARCHES) + r")$")


def parse_dnf_list(text: str) -> dict[str, list[str]]:
    """``dnf --showduplicates list --available <names>`` -> package -> versions offered, in dnf's order.

    Versions keep dnf's spelling: ``[epoch:]version-release`` (dnf prints the epoch only when it is not 0,
    e.g. NVIDIA's RHEL driver packages ``3:580.82.07-1.el9``). Rows under "Installed Packages" are skipped
    (the installed version is not necessarily one the repository still offers); source packages too.
    """
    offered: dict[str, list[str]] = {}
    section = "Available Packages"
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.strip() in ("Installed Packages", "Available Packages", "Available Upgrades", "Extra Packages"):
            section = line.strip()
            pending = None
            continue
        fields = line.split()
        if pending is not None and raw[:1].isspace() and len(fields) == 2:
            fields = [pending, *fields]
        pending = None
        head = _NAME_ARCH.match(fields[0])
        if not head:
            continue
        if len(fields) == 1:
            pending = fields[0]
            continue
        if len(fields) != 3 or section != "Available Packages" or head.group("arch") == "src":
            continue
        versions = offered.setdefault(head.group("name"), [])
        if fields[1] not in versions:
            versions.append(fields[1])
    return offered


def resolve_all(
    offered: dict[str, list[str]], pins: dict[str, str], contains: dict[str, str] | None = None
) -> tuple[dict[str, str], list[str]]:
    """Every package's one matching version, and the errors (each naming its package and what is offered)."""
    resolved: dict[str, str] = {}
    errors: list[str] = []
    for name, upstream in pins.items():
        try:
            resolved[name] = pick(name, offered.get(name, []), upstream, (contains or {}).get(name, ""))
        except ResolveError as exc:
            errors.append(str(exc))
    return resolved, errors
