#!/usr/bin/python
# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
---
module: pinned_packages
short_description: Install packages at an exact or resolved version, hold them, fence unattended-upgrades (apt)
version_added: 0.1.0
description:
  - The install path every role of the GPU stack shares on Debian and Ubuntu. One C(dpkg-query) reads which of
    the packages are not installed at their version; only then does the module ask C(apt-cache show) whether
    the configured repositories offer them (a clear error naming the packages, the version, apt's own message
    and O(missing_hint) when not) and run one C(apt-get install) with the exact versions, allowing downgrades
    and held packages, without recommends, keeping changed configuration files.
  - Then it holds the packages that C(apt-mark showhold) does not list yet (nothing else is changed, so a
    second run reports no change) and, when O(unattended_upgrades_file) is set, writes the
    C(Unattended-Upgrade::Package-Blacklist) file that names them.
  - Check mode runs none of C(apt-get install), C(apt-mark hold) or the file write; it reports what it would
    install and hold (also as a diff). On a fresh host the repository may not be configured yet (its source
    is only previewed by the same check run), so a version the repositories lack is then a warning and the
    RV(unavailable) list, not a failure.
  - A package pinned by its upstream release (O(upstream_version), O(upstream_versions)) is resolved on the
    host, not spelled by rule; the revision a repository adds (C(-1), C(-0ubuntu1), C(-1ubuntu1),
    C(-1+cuda12.9), a C(-2) re-spin) is whatever C(apt-cache madison) lists. The one version whose
    upstream part is the pin and whose text carries O(version_contains) is installed and held at that exact
    version (RV(resolved)); none or several is an error before anything is changed, listing the versions the
    repositories do offer, with O(missing_hint). A package already installed at a matching version is kept
    without asking the repositories (a second run changes nothing even if the repository re-spun it since).
  - Debian and Ubuntu only (dpkg and apt); the roles' Red Hat paths use dnf and dnf versionlock, resolved
    with the gpufleet.cluster.dnf_resolve filter.
options:
  name:
    description:
      - The packages to install, hold and list in the blacklist file.
      - Each is installed at its version from O(versions), else at O(version); a name with neither is
        installed at the repository's candidate when it is not installed at all (and still held).
    type: list
    elements: str
    required: true
  version:
    description: One exact package version (as dpkg prints it, epoch included) for every name of O(name).
    type: str
  versions:
    description: An exact version per package name; wins over O(version), O(upstream_version) and O(upstream_versions).
    type: dict
    default: {}
  upstream_version:
    description:
      - The upstream release (C(580.159.04), C(2.27.7), C(4.2.3)) every name of O(name) without an exact
        version is pinned to, resolved against the versions C(apt-cache madison) lists (any revision; an
        epoch on the repository's version is ignored unless the pin gives one).
      - Mutually exclusive with O(version).
    type: str
  upstream_versions:
    description: An upstream release per package name, resolved like O(upstream_version); wins over it and O(version).
    type: dict
    default: {}
  version_contains:
    description:
      - Text a resolved version must carry besides its upstream release, e.g. C(+cuda12.9) for NCCL, whose
        packages are built once per CUDA minor (C(2.27.7-1+cuda12.9), C(2.27.7-1+cuda13.0)).
    type: str
    default: ""
  also_install:
    description:
      - Packages installed in the same apt transaction when they are not installed at all, at the
        repository's candidate, and neither held nor listed in the blacklist file (build tools, a runtime the
        pinned packages need).
    type: list
    elements: str
    default: []
  upgrade:
    description:
      - Also pass the O(name) entries without a version to C(apt-get install) when they are installed,
        which brings them to the repository's candidate (for a repository that is itself the pin, such as
        one DOCA release). Reported as installed only when a version changed.
    type: bool
    default: false
  hold:
    description: Hold the O(name) packages (C(apt-mark hold) of those not held yet). False leaves holds alone.
    type: bool
    default: true
  update_cache:
    description: Run C(apt-get update) before installing, when something is to be installed (not in check mode).
    type: bool
    default: false
  lock_timeout:
    description: Seconds apt waits for the dpkg lock (C(DPkg::Lock::Timeout)).
    type: int
    default: 60
  missing_hint:
    description: Appended to the error when the repositories lack a package at its version (what to run or check).
    type: str
    default: ""
  owner:
    description: The role that manages the packages, named in the blacklist file's header.
    type: str
    default: gpufleet
  unattended_upgrades_file:
    description:
      - Path of the C(apt.conf.d) file listing the O(name) packages (and O(unattended_upgrades_extra)) in
        C(Unattended-Upgrade::Package-Blacklist); written atomically, mode 0644, only when its content
        differs. Not written when omitted.
    type: path
  unattended_upgrades_note:
    description: The file's second comment line (why the packages are pinned).
    type: str
    default: ""
  unattended_upgrades_extra:
    description: More names (or patterns) for the blacklist, neither installed nor held.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - gpufleet.cluster.attributes
attributes:
  diff_mode:
    support: full
    details: The packages installed or held, and the unattended-upgrades blacklist file, as before and after.
"""

EXAMPLES = r"""
- name: Install the toolkit at an exact version and hold it
  gpufleet.cluster.pinned_packages:
    name: [cuda-toolkit-12-8]
    version: 12.8.1-1
    owner: cuda
    missing_hint: "The nvidia_driver role configures NVIDIA's CUDA repository: run it first."
    unattended_upgrades_file: /etc/apt/apt.conf.d/51gpufleet-cuda
    unattended_upgrades_note: "CUDA is pinned to 12.8: upgrades go through gpufleet only."
  register: __cuda_install

- name: Install NCCL 2.27.7 built for CUDA 12.9, whatever revision the repository gives it, and hold it
  gpufleet.cluster.pinned_packages:
    name: [libnccl2, libnccl-dev]
    upstream_version: 2.27.7
    version_contains: +cuda12.9
    owner: nccl
    missing_hint: "Check software.nccl and software.cuda in the brief."
  register: __nccl_install  # __nccl_install.resolved: {"libnccl2": "2.27.7-1+cuda12.9", ...}

- name: Reload systemd only when a package was installed (not merely held)
  ansible.builtin.systemd_service:
    daemon_reload: true
  when: __cuda_install.installed | length > 0
"""

RETURN = r"""
missing:
  description:
    - The packages (C(name=version), or C(name) when unversioned) not installed at their version before the run.
  type: list
  elements: str
  returned: always
installed:
  description:
    - What the run installed or replaced, as C(name=version); in check mode what it would install.
  type: list
  elements: str
  returned: always
already:
  description: The O(name) packages already installed at their version, as C(name=version).
  type: list
  elements: str
  returned: always
held:
  description: The packages the run held (in check mode, would hold); empty when all were held already.
  type: list
  elements: str
  returned: always
unavailable:
  description:
    - Check mode only - the packages the configured repositories do not offer at their version (yet); an
      unresolved upstream pin as C(name=<release>-*).
  type: list
  elements: str
  returned: always
resolved:
  description:
    - The exact version of every package of O(name) with a version, as package -> version; for an upstream pin
      the version installed at a matching release, or the one the repositories offer. An upstream pin not
      resolved in check mode is left out.
  type: dict
  returned: always
unattended_upgrades_changed:
  description: Whether the blacklist file was (or, in check mode, would be) written.
  type: bool
  returned: always
"""

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.common.pkg_resolve import (
    matches,
    parse_madison,
    resolve_all,
)

DPKG_FORMAT = "-f=${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"


def parse_dpkg(text: str) -> dict[str, str]:
    """``dpkg-query -W -f='${Package}\\t${Version}\\t${db:Status-Abbrev}\\n'`` -> installed name -> version.

    Installed means status ``i`` (any wanted state: install, hold, ...) and no error flag; a package that is
    half-configured, unpacked only, or has only its configuration files left is not installed.
    """
    installed: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        name, version, status = parts[0].split(":")[0], parts[1], parts[2]
        if len(status) >= 2 and status[1] == "i" and status[2:].strip() == "":
            installed[name] = version
    return installed


def parse_showhold(text: str) -> set[str]:
    """``apt-mark showhold`` -> held names (it may print ``libnccl2:amd64`` for a multi-arch package)."""
    return {line.strip().split(":")[0] for line in text.splitlines() if line.strip()}


def parse_offered(text: str) -> set[tuple[str, str]]:
    """``apt-cache show`` stanzas -> {(package, version)}."""
    offered = set()
    package = None
    for line in text.splitlines():
        if line.startswith("Package: "):
            package = line[len("Package: ") :].strip()
        elif line.startswith("Version: ") and package:
            offered.add((package, line[len("Version: ") :].strip()))
        elif not line.strip():
            package = None
    return offered


def spec(name: str, version: str | None) -> str:
    return f"{name}={version}" if version else name


def plan(
    wanted: dict[str, str | None], extra: list[str], installed: dict[str, str], upgrade: bool
) -> tuple[list[str], list[str], list[str]]:
    """(missing, to pass to apt-get install, already at version) for the wanted packages and the extras."""
    missing, install, already = [], [], []
    for name, version in wanted.items():
        have = installed.get(name)
        if have is None or (version is not None and have != version):
            missing.append(spec(name, version))
            install.append(spec(name, version))
        else:
            already.append(spec(name, have))
            if version is None and upgrade:
                install.append(name)
    for name in extra:
        if name not in installed and name not in wanted:
            missing.append(name)
            install.append(name)
    return missing, install, already


def lacking(specs: list[str], offered: set[tuple[str, str]]) -> list[str]:
    """The specs no ``apt-cache show`` stanza offers (name=version exactly, or the bare name at any version)."""
    names = {package for package, _version in offered}
    out = []
    for item in specs:
        name, sep, version = item.partition("=")
        if (name, version) not in offered if sep else name not in names:
            out.append(item)
    return out


def blacklist_text(owner: str, note: str, names: list[str]) -> str:
    lines = [f"// Managed by gpufleet (role {owner}): local changes are overwritten."]
    if note:
        lines.append(f"// {note}")
    lines.append("Unattended-Upgrade::Package-Blacklist {")
    lines.extend(f'    "{name}";' for name in names)
    lines.append("};")
    return "\n".join(lines) + "\n"


class Pinner:
    def __init__(self, module: AnsibleModule):
        self.module = module
        self.env = {"LC_ALL": "C", "DEBIAN_FRONTEND": "noninteractive", "DEBIAN_PRIORITY": "critical"}

    def run(self, argv: list[str], what: str, check_rc: bool = True) -> tuple[int, str, str]:
        rc, out, err = self.module.run_command(argv, environ_update=self.env)
        if check_rc and rc != 0:
            self.module.fail_json(
                msg=f"{what} failed (exit {rc}): {(err or out).strip()}", cmd=argv, rc=rc, stdout=out, stderr=err
            )
        return rc, out, err

    def dpkg(self, names: list[str]) -> dict[str, str]:
        # dpkg-query exits 1 when a name is unknown, and still prints the known ones.
        _rc, out, _err = self.run(["dpkg-query", "-W", DPKG_FORMAT, *names], "dpkg-query", check_rc=False)
        return parse_dpkg(out)

    def offered(self, specs: list[str]) -> tuple[list[str], str]:
        """The specs the repositories lack, and apt-cache's message. Some apt versions exit 0 when a name is
        unknown, so the stanzas printed are what counts."""
        _rc, out, err = self.run(["apt-cache", "show", *specs], "apt-cache show", check_rc=False)
        return lacking(specs, parse_offered(out)), err.strip()

    def madison(self, names: list[str]) -> dict[str, list[str]]:
        """The versions the configured repositories offer for each name (an unknown name: none)."""
        _rc, out, _err = self.run(["apt-cache", "madison", *names], "apt-cache madison", check_rc=False)
        return parse_madison(out)

    def apt_get(self, *args: str) -> list[str]:
        timeout = str(self.module.params["lock_timeout"])
        return ["apt-get", *args, "-o", f"DPkg::Lock::Timeout={timeout}"]


def write_blacklist(module: AnsibleModule, path: str, content: str) -> tuple[bool, dict]:
    before = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            before = handle.read()
    diff = {"before_header": path, "after_header": path, "before": before, "after": content}
    changed = before != content
    if changed and not module.check_mode:
        directory = os.path.dirname(path) or "."
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".gpufleet-")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.chmod(tmp, 0o644)
        module.atomic_move(tmp, path)
    if os.path.exists(path):
        changed = module.set_mode_if_different(path, "0644", changed)
    return changed, diff


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "list", "elements": "str", "required": True},
            "version": {"type": "str"},
            "versions": {"type": "dict", "default": {}},
            "upstream_version": {"type": "str"},
            "upstream_versions": {"type": "dict", "default": {}},
            "version_contains": {"type": "str", "default": ""},
            "also_install": {"type": "list", "elements": "str", "default": []},
            "upgrade": {"type": "bool", "default": False},
            "hold": {"type": "bool", "default": True},
            "update_cache": {"type": "bool", "default": False},
            "lock_timeout": {"type": "int", "default": 60},
            "missing_hint": {"type": "str", "default": ""},
            "owner": {"type": "str", "default": "gpufleet"},
            "unattended_upgrades_file": {"type": "path"},
            "unattended_upgrades_note": {"type": "str", "default": ""},
            "unattended_upgrades_extra": {"type": "list", "elements": "str", "default": []},
        },
        mutually_exclusive=[("version", "upstream_version")],
        supports_check_mode=True,
    )
    p = module.params
    names = list(dict.fromkeys(n.strip() for n in p["name"] if n and n.strip()))
    extra = list(dict.fromkeys(n.strip() for n in p["also_install"] if n and n.strip()))
    bad = [n for n in names + extra if "=" in n or " " in n]
    if bad:
        module.fail_json(msg=f"pinned_packages: give bare package names (versions go in version/versions), found {bad}")
    # Per name: an exact version, else an upstream release to resolve, else the exact version for all, else
    # the upstream release for all.
    upstream: dict[str, str] = {}
    wanted: dict[str, str | None] = {}
    for n in names:
        if n in p["versions"]:
            wanted[n] = str(p["versions"][n]) or None
        elif n in p["upstream_versions"] and str(p["upstream_versions"][n]):
            upstream[n] = str(p["upstream_versions"][n])
        elif p["version"]:
            wanted[n] = p["version"]
        elif p["upstream_version"]:
            upstream[n] = p["upstream_version"]
        else:
            wanted[n] = None
    for option in ("versions", "upstream_versions"):
        unknown = sorted(set(p[option]) - set(names))
        if unknown:
            module.fail_json(msg=f"pinned_packages: {option} names packages not in name: {unknown}")
    if not shutil.which("dpkg-query"):
        module.fail_json(msg="pinned_packages: no dpkg-query on this host (Debian and Ubuntu only)")

    pinner = Pinner(module)
    result = {
        "changed": False,
        "missing": [],
        "installed": [],
        "already": [],
        "held": [],
        "unavailable": [],
        "unattended_upgrades_changed": False,
        "resolved": {},
    }
    diffs: dict = {"before": "", "after": ""}
    before = pinner.dpkg(names + extra) if names or extra else {}
    contains = p["version_contains"]
    # An upstream pin the installed version already matches stays as it is; the others are resolved
    # against the repositories before anything is changed.
    to_resolve = {}
    for n, release in upstream.items():
        if n in before and matches(before[n], release, contains):
            wanted[n] = before[n]
        else:
            to_resolve[n] = release
    updated = False
    unresolved: set[str] = set()
    if to_resolve:
        if p["update_cache"] and not module.check_mode:
            pinner.run(pinner.apt_get("update", "-q"), "apt-get update")
            updated = True
        found, errors = resolve_all(pinner.madison(list(to_resolve)), to_resolve, dict.fromkeys(to_resolve, contains))
        wanted.update(found)
        if errors:
            text = (
                f"The configured repositories offer no single version for the pin: {'; '.join(errors)}."
                f"{' ' + p['missing_hint'] if p['missing_hint'] else ''}"
            )
            pattern = "-*" + (contains + "*" if contains else "")
            result["unavailable"] = [f"{n}={r}{pattern}" for n, r in to_resolve.items() if n not in found]
            if not module.check_mode:
                module.fail_json(msg=text, **{k: v for k, v in result.items() if k != "changed"})
            module.warn(text + " (check mode: the repository may only be previewed yet)")
            # Shown as the release pattern in what check mode would install.
            for n, r in to_resolve.items():
                if n not in found:
                    unresolved.add(n)
                    wanted[n] = f"{r}{pattern}"
    result["resolved"] = {n: v for n, v in wanted.items() if v is not None and n not in unresolved}
    wanted = {n: wanted[n] for n in names}
    missing, install, already = plan(wanted, extra, before, p["upgrade"])
    result.update(missing=missing, already=already)

    if install:
        if p["update_cache"] and not module.check_mode and not updated:
            pinner.run(pinner.apt_get("update", "-q"), "apt-get update")
        # Only the pinned names are looked up: an also_install name may be virtual (apt-cache show refuses
        # those), and apt-get install names an unknown one itself.
        # Resolved upstream pins are offered by construction (unresolved ones are reported above).
        pinned = [i for i in install if i.partition("=")[0] in wanted and i.partition("=")[0] not in upstream]
        lack, message = pinner.offered(pinned) if pinned else ([], "")
        if lack:
            text = (
                f"The configured repositories do not offer {', '.join(lack)}"
                f"{' (' + message + ')' if message else ''}.{' ' + p['missing_hint'] if p['missing_hint'] else ''}"
            )
            result["unavailable"] = result["unavailable"] + lack
            if not module.check_mode:
                module.fail_json(msg=text, **{k: v for k, v in result.items() if k != "changed"})
            module.warn(text + " (check mode: the repository may only be previewed yet)")
        if module.check_mode:
            result["installed"] = missing
        else:
            argv = pinner.apt_get(
                "install",
                "-y",
                "-q",
                "--no-install-recommends",
                "--allow-downgrades",
                "--allow-change-held-packages",
                "-o",
                "Dpkg::Options::=--force-confdef",
                "-o",
                "Dpkg::Options::=--force-confold",
                *install,
            )
            pinner.run(argv, "apt-get install")
            after = pinner.dpkg(list(wanted) + extra)
            result["installed"] = [spec(n, v) for n, v in after.items() if before.get(n) != v]
            still = plan(wanted, extra, after, False)[0]
            if still:
                module.fail_json(
                    msg=f"apt-get install ran, yet dpkg does not show {', '.join(still)} installed at the version",
                    **{k: v for k, v in result.items() if k != "changed"},
                )
        if result["installed"]:
            result["changed"] = True
            for item in missing:
                name = item.partition("=")[0]
                diffs["before"] += f"{name}={before[name]}\n" if name in before else f"{name}: not installed\n"
            diffs["after"] += "".join(f"install {item}\n" for item in result["installed"])

    if p["hold"] and names:
        _rc, out, _err = pinner.run(["apt-mark", "showhold"], "apt-mark showhold")
        unheld = [n for n in names if n not in parse_showhold(out)]
        if unheld:
            if not module.check_mode:
                pinner.run(["apt-mark", "hold", *unheld], "apt-mark hold")
            result["held"] = unheld
            result["changed"] = True
            diffs["after"] += "".join(f"hold {n}\n" for n in unheld)

    path = p["unattended_upgrades_file"]
    prepared = []
    if path:
        content = blacklist_text(p["owner"], p["unattended_upgrades_note"], names + p["unattended_upgrades_extra"])
        changed, file_diff = write_blacklist(module, path, content)
        result["unattended_upgrades_changed"] = changed
        if changed:
            result["changed"] = True
            prepared.append(file_diff)

    if result["changed"] and (diffs["before"] or diffs["after"]):
        prepared.insert(0, {"before_header": "packages", "after_header": "packages", **diffs})
    if prepared:
        result["diff"] = prepared
    module.exit_json(**result)


if __name__ == "__main__":
    main()
