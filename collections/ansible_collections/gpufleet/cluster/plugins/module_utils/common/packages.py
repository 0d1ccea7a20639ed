# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
"""Which requested packages are missing from a host's package database, shared by the
gpufleet.cluster.missing_packages module (on the host) and its action plugin (in the controller, when it
answers from the host's package list read earlier in the run; module_utils/common/host_packages.py)."""

from __future__ import annotations

# gpufleet.cluster.missing_packages's arguments, checked by the module on the host and by its action plugin
# when it answers in the controller.
ARGUMENT_SPEC = {
    "names": {"type": "list", "elements": "str", "required": True},
    "snapshot": {"type": "bool", "default": False},
}


def split_spec(spec: str) -> tuple[str, str | None]:
    """``nvidia-smi=570.133.20-1`` -> (``nvidia-smi``, ``570.133.20-1``); a bare name has no version."""
    name, sep, version = spec.partition("=")
    return name.strip(), (version.strip() if sep else None)


def parse_dpkg(text: str) -> dict[str, str]:
    """``dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'`` -> installed name -> version.

    Only fully installed packages count (status ``ii``/``hi``: wanted install or hold, installed); a package
    that is half-configured or only has its configuration files left is missing.
    """
    installed: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        name, version, status = parts[0].split(":")[0], parts[1], parts[2].strip()
        if len(status) >= 2 and status[1] == "i" and status[0] in "ih":
            installed[name] = version
    return installed


def parse_rpm(text: str) -> dict[str, str]:
    """``rpm -q --qf '%{NAME}\\t%{VERSION}-%{RELEASE}\\n'`` -> installed name -> version-release."""
    installed: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, version = line.partition("\t")
        if sep:
            installed[name] = version
    return installed


def missing_of(specs: list[str], installed: dict[str, str]) -> list[str]:
    """The specs not satisfied by ``installed`` (exact version, or a prefix with a trailing ``*``)."""
    out = []
    for spec in specs:
        name, version = split_spec(spec)
        have = installed.get(name)
        if have is None:
            out.append(spec)
        elif version is not None:
            ok = have.startswith(version[:-1]) if version.endswith("*") else have == version
            if not ok:
                out.append(spec)
    return out


def wanted(specs: list[str]) -> list[str]:
    """The specs that name a package (blank entries dropped)."""
    return [s for s in specs if s and s.strip()]


def answer(specs: list[str], installed: dict[str, str], manager: str) -> dict:
    """The module's result for ``specs`` against a host's installed packages (name -> version)."""
    names = {split_spec(s)[0] for s in specs}
    return {
        "changed": False,
        "missing": missing_of(specs, installed),
        "installed": {name: version for name, version in installed.items() if name in names},
        "manager": manager,
    }
