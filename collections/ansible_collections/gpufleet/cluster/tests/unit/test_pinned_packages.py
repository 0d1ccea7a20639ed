"""pinned_packages: install at the pin, hold, fence unattended-upgrades - driven through command doubles.

The doubles are small scripts put first on PATH, named as the tools they play (dpkg-query, apt-cache, apt-get,
apt-mark). They read and write a fake package database under the test's tmp dir, print what the real tools
print (dpkg-query's -f format, apt-cache show's stanzas and "E: Version '...' for '...' was not found", apt-mark's
"... set on hold." lines) and log every argv, so each test can check exactly what the module ran.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import textwrap

import pytest
from ansible_collections.gpufleet.cluster.plugins.modules import pinned_packages as pp
from module_helpers import FailJson, module_args, run_main

DOUBLE = textwrap.dedent(
    """\
    #!{python}
    # Test double of {tool}: a fake package database in $PINNED_DOUBLE_DIR, the real tool's output formats.
    import json, os, sys
    d = os.environ["PINNED_DOUBLE_DIR"]
    tool, args = os.path.basename(sys.argv[0]), sys.argv[1:]
    with open(os.path.join(d, "log.jsonl"), "a") as f:
        f.write(json.dumps([tool] + args) + "\\n")
    db = json.load(open(os.path.join(d, "db.json")))
    def save():
        json.dump(db, open(os.path.join(d, "db.json"), "w"))
    if tool == "dpkg-query":
        names = [a for a in args if not a.startswith("-")]
        rc = 0
        for n in names:
            if n in db["installed"]:
                v, st = db["installed"][n]
                print(f"{{n}}\\t{{v}}\\t{{st}}")
            else:
                print(f"dpkg-query: no packages found matching {{n}}", file=sys.stderr)
                rc = 1
        sys.exit(rc)
    if tool == "apt-cache" and args[0] == "madison":
        # apt's Madison(): "<package> | <version> | <archive URI> <suite/component> Packages", right-aligned
        # in 10 columns; an unknown name is a notice on stderr and exit 0.
        for n in args[1:]:
            if n not in db["repo"]:
                print(f"N: Unable to locate package {{n}}", file=sys.stderr)
            for ver in reversed(db["repo"].get(n, [])):
                uri = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"
                print(f"{{n:>10}} | {{ver:>10}} | {{uri}}  Packages")
        sys.exit(0)
    if tool == "apt-cache":
        rc = 0
        for spec in args[1:]:
            n, _, v = spec.partition("=")
            versions = db["repo"].get(n, [])
            if not versions:
                print(f"N: Unable to locate package {{n}}", file=sys.stderr)
                print("E: No packages found", file=sys.stderr)
                rc = 100
            elif v and v not in versions:
                print(f"E: Version '{{v}}' for '{{n}}' was not found", file=sys.stderr)
                rc = 100
            else:
                for ver in [v] if v else versions:
                    print(f"Package: {{n}}\\nVersion: {{ver}}\\nArchitecture: amd64\\n")
        # Some apt versions exit 0 when a name is unknown.
        sys.exit(0 if os.environ.get("PINNED_DOUBLE_APT_CACHE_EXIT_0") else rc)
    if tool == "apt-get":
        if args[0] == "install":
            specs = [a for i, a in enumerate(args[1:]) if not a.startswith("-") and args[i] != "-o"]
            for spec in specs:
                n, _, v = spec.partition("=")
                db["installed"][n] = [v or db["repo"][n][-1], "ii "]
            save()
            print("Reading package lists...")
        sys.exit(0)
    if tool == "apt-mark":
        if args[0] == "showhold":
            for n in db["holds"]:
                print(n)
        elif args[0] == "hold":
            for n in args[1:]:
                if n in db["holds"]:
                    print(f"{{n}} was already set on hold.")
                else:
                    db["holds"].append(n)
                    print(f"{{n}} set on hold.")
            save()
        sys.exit(0)
    sys.exit(2)
    """
)

CUDA = "cuda-toolkit-12-8"
NCCL = ["libnccl2", "libnccl-dev"]
NCCL_V = "2.26.2-1+cuda12.8"
NCCL_NEW = "2.26.5-1+cuda12.8"


@pytest.fixture
def apt(tmp_path, monkeypatch):
    """A host with the doubles on PATH; returns a helper to set the database and read the log."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("dpkg-query", "apt-cache", "apt-get", "apt-mark"):
        script = bindir / tool
        script.write_text(DOUBLE.format(python=sys.executable, tool=tool))
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PINNED_DOUBLE_DIR", str(tmp_path))

    class Apt:
        dir = tmp_path

        def set(self, installed=None, repo=None, holds=None):
            db = {"installed": installed or {}, "repo": repo or {}, "holds": holds or []}
            (tmp_path / "db.json").write_text(json.dumps(db))

        def db(self):
            return json.loads((tmp_path / "db.json").read_text())

        def calls(self, tool=None):
            log = tmp_path / "log.jsonl"
            lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
            return [c for c in lines if tool is None or c[0] == tool]

    return Apt()


def nccl_repo():
    return {n: [NCCL_V, NCCL_NEW] for n in NCCL}


def run(args, check=False):
    if check:
        args = {**args, "_ansible_check_mode": True}
    return run_main(pp.main, {"_ansible_diff": True, **args})


def test_nothing_missing_installs_nothing_and_changes_nothing(apt):
    apt.set(installed={n: [NCCL_V, "hi "] for n in NCCL}, repo=nccl_repo(), holds=list(NCCL))
    out = run({"name": NCCL, "version": NCCL_V})
    assert out["changed"] is False
    assert out["missing"] == [] and out["installed"] == [] and out["held"] == []
    assert out["already"] == [f"{n}={NCCL_V}" for n in NCCL]
    assert [c[1] for c in apt.calls()] == ["-W", "showhold"]  # one dpkg-query, one showhold, nothing else


def test_one_package_at_another_version_is_installed_with_the_pinned_argv(apt):
    apt.set(
        installed={"libnccl2": [NCCL_NEW, "ii "], "libnccl-dev": [NCCL_V, "ii "]},
        repo=nccl_repo(),
        holds=list(NCCL),
    )
    out = run({"name": NCCL, "version": NCCL_V, "lock_timeout": 600})
    assert out["changed"] is True
    assert out["missing"] == [f"libnccl2={NCCL_V}"]
    assert out["installed"] == [f"libnccl2={NCCL_V}"]
    assert apt.calls("apt-cache") == [["apt-cache", "show", f"libnccl2={NCCL_V}"]]
    # apt-get as the roles' apt tasks ran it: exact version, downgrades and held packages allowed, no
    # recommends, changed configuration files kept, the dpkg lock waited for.
    expected = "apt-get install -y -q --no-install-recommends --allow-downgrades --allow-change-held-packages"
    expected += f" -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold libnccl2={NCCL_V}"
    assert apt.calls("apt-get") == [(expected + " -o DPkg::Lock::Timeout=600").split()]
    assert apt.db()["installed"]["libnccl2"][0] == NCCL_V
    assert out["diff"][0]["before"] == f"libnccl2={NCCL_NEW}\n"
    assert out["diff"][0]["after"] == f"install libnccl2={NCCL_V}\n"


def test_pin_not_in_the_repository_fails_naming_package_version_and_hint(apt):
    apt.set(repo={CUDA: ["12.9.0-1"]})
    hint = "The nvidia_driver role configures NVIDIA's CUDA repository: run it first."
    with module_args({"name": [CUDA], "version": "12.8.1-1", "missing_hint": hint}), pytest.raises(FailJson) as exc:
        pp.main()
    msg = exc.value.args[0]["msg"]
    assert f"{CUDA}=12.8.1-1" in msg
    assert f"E: Version '12.8.1-1' for '{CUDA}' was not found" in msg
    assert msg.endswith(hint)
    assert apt.calls("apt-get") == [] and apt.calls("apt-mark") == []


def test_unknown_package_is_named_even_when_apt_cache_exits_zero(apt, monkeypatch):
    # Some apt versions exit 0 for an unknown name: the stanzas printed decide, not the exit status.
    apt.set(repo={"kubeadm": ["1.32.3-1.1"]})
    monkeypatch.setenv("PINNED_DOUBLE_APT_CACHE_EXIT_0", "1")
    with module_args({"name": ["kubeadm", "kubelet"], "version": "1.32.3-1.1"}), pytest.raises(FailJson) as exc:
        pp.main()
    assert "do not offer kubelet=1.32.3-1.1 (" in exc.value.args[0]["msg"]
    assert exc.value.args[0]["unavailable"] == ["kubelet=1.32.3-1.1"]


def test_unavailable_pin_in_check_mode_is_a_warning_and_changes_nothing(apt, monkeypatch):
    warnings = []
    monkeypatch.setattr(pp.AnsibleModule, "warn", lambda self, msg: warnings.append(msg))
    apt.set(repo={})
    out = run({"name": [CUDA], "version": "12.8.1-1", "unattended_upgrades_file": str(apt.dir / "51x")}, check=True)
    assert out["changed"] is True
    assert out["unavailable"] == [f"{CUDA}=12.8.1-1"]
    assert out["installed"] == [f"{CUDA}=12.8.1-1"] and out["held"] == [CUDA]
    assert any(f"do not offer {CUDA}=12.8.1-1" in w for w in warnings), warnings
    assert apt.calls("apt-get") == []
    assert [c for c in apt.calls("apt-mark") if c[1] == "hold"] == []
    assert not (apt.dir / "51x").exists()


def test_check_mode_reports_install_and_hold_but_runs_neither(apt):
    apt.set(installed={"libnccl2": [NCCL_NEW, "ii "]}, repo=nccl_repo())
    out = run({"name": NCCL, "version": NCCL_V}, check=True)
    assert out["changed"] is True
    assert out["installed"] == [f"libnccl2={NCCL_V}", f"libnccl-dev={NCCL_V}"]
    assert out["held"] == NCCL
    assert (
        out["diff"][0]["after"]
        == f"install libnccl2={NCCL_V}\ninstall libnccl-dev={NCCL_V}\nhold libnccl2\nhold libnccl-dev\n"
    )
    assert apt.calls("apt-get") == []
    assert [c[1] for c in apt.calls("apt-mark")] == ["showhold"]
    assert apt.db()["installed"] == {"libnccl2": [NCCL_NEW, "ii "]} and apt.db()["holds"] == []


def test_only_the_unheld_packages_are_held_and_the_second_run_changes_nothing(apt):
    apt.set(installed={n: [NCCL_V, "ii "] for n in NCCL}, repo=nccl_repo(), holds=["libnccl2:amd64"])
    out = run({"name": NCCL, "version": NCCL_V})
    assert out["changed"] is True and out["held"] == ["libnccl-dev"] and out["installed"] == []
    assert apt.calls("apt-mark")[-1] == ["apt-mark", "hold", "libnccl-dev"]
    again = run({"name": NCCL, "version": NCCL_V})
    assert again["changed"] is False and again["held"] == []


def test_hold_false_leaves_holds_alone(apt):
    apt.set(installed={n: [NCCL_V, "ii "] for n in NCCL}, repo=nccl_repo())
    out = run({"name": NCCL, "version": NCCL_V, "hold": False})
    assert out["changed"] is False
    assert apt.calls("apt-mark") == []


def test_blacklist_file_is_written_once_then_unchanged(apt):
    apt.set(installed={n: [NCCL_V, "hi "] for n in NCCL}, repo=nccl_repo(), holds=list(NCCL))
    path = apt.dir / "51gpufleet-nccl"
    args = {
        "name": NCCL,
        "version": NCCL_V,
        "owner": "nccl",
        "unattended_upgrades_file": str(path),
        "unattended_upgrades_note": f"NCCL is pinned to {NCCL_V}: upgrades go through gpufleet only.",
        "unattended_upgrades_extra": ["libnccl*"],
    }
    first = run(args)
    assert first["changed"] is True and first["unattended_upgrades_changed"] is True
    assert path.read_text() == (
        "// Managed by gpufleet (role nccl): local changes are overwritten.\n"
        f"// NCCL is pinned to {NCCL_V}: upgrades go through gpufleet only.\n"
        "Unattended-Upgrade::Package-Blacklist {\n"
        '    "libnccl2";\n'
        '    "libnccl-dev";\n'
        '    "libnccl*";\n'
        "};\n"
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert first["diff"][-1]["before"] == "" and first["diff"][-1]["after"] == path.read_text()
    second = run(args)
    assert second["changed"] is False and second["unattended_upgrades_changed"] is False
    path.write_text("// edited by hand\n")
    preview = run(args, check=True)
    assert preview["changed"] is True and path.read_text() == "// edited by hand\n"


def test_versions_per_package_and_unpinned_extras(apt):
    apt.set(
        installed={"runc": ["1.1.5+ds1-1", "ii "]},
        repo={
            "nvidia-driver-cuda": ["570.133.20-1"],
            "nvidia-fabricmanager-570": ["570.133.20-1"],
            "containerd": ["1.6.20~ds1-1"],
        },
    )
    out = run(
        {
            "name": ["nvidia-driver-cuda", "nvidia-fabricmanager-570"],
            "version": "570.133.20-1",
            "versions": {"nvidia-fabricmanager-570": "570.133.20-1"},
            "also_install": ["containerd", "runc"],
        }
    )
    # Only the pinned names are looked up (an extra may be a virtual package, which apt-cache show refuses).
    assert apt.calls("apt-cache") == [
        ["apt-cache", "show", "nvidia-driver-cuda=570.133.20-1", "nvidia-fabricmanager-570=570.133.20-1"]
    ]
    install = apt.calls("apt-get")[0]
    assert install[-5:-2] == ["nvidia-driver-cuda=570.133.20-1", "nvidia-fabricmanager-570=570.133.20-1", "containerd"]
    assert sorted(out["installed"]) == [
        "containerd=1.6.20~ds1-1",
        "nvidia-driver-cuda=570.133.20-1",
        "nvidia-fabricmanager-570=570.133.20-1",
    ]
    # Only the pinned names are held; the extras stay free.
    assert out["held"] == ["nvidia-driver-cuda", "nvidia-fabricmanager-570"]


def test_unversioned_names_install_when_absent_and_upgrade_only_when_asked(apt):
    apt.set(installed={"doca-ofed": ["2.9.1-1", "ii "]}, repo={"doca-ofed": ["2.10.0-1"]}, holds=["doca-ofed"])
    out = run({"name": ["doca-ofed"]})
    assert out["changed"] is False and apt.calls("apt-get") == []
    out = run({"name": ["doca-ofed"], "upgrade": True})
    assert out["changed"] is True and out["installed"] == ["doca-ofed=2.10.0-1"]
    again = run({"name": ["doca-ofed"], "upgrade": True})
    assert again["changed"] is False and again["installed"] == []


def test_half_installed_package_counts_as_missing():
    text = "libnccl2\t2.26.2-1+cuda12.8\tiU \nlibnccl-dev\t2.26.2-1+cuda12.8\thi \ncuda-toolkit-12-8\t12.8.1-1\trc \n"
    assert pp.parse_dpkg(text) == {"libnccl-dev": "2.26.2-1+cuda12.8"}


def test_versions_for_names_not_listed_are_refused(apt):
    apt.set()
    with module_args({"name": NCCL, "versions": {"libnccl3": "1"}}), pytest.raises(FailJson) as exc:
        pp.main()
    assert "libnccl3" in exc.value.args[0]["msg"]


# Upstream pins, resolved against the repository. The versions below are shaped like the listings of
# NVIDIA's CUDA repositories (https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/
# and .../debian12/x86_64/): the Ubuntu driver's revision alternates between releases (-0ubuntu1, -1ubuntu1),
# NCCL is built once per CUDA minor (-1+cuda12.8, -1+cuda12.9), DCGM carries an epoch (1:4.2.3-1).
DRV = ["nvidia-driver-580-open", "nvidia-dkms-580-open"]
DRV_REPO = ["580.65.06-0ubuntu1", "580.82.07-1ubuntu1", "580.95.05-0ubuntu1"]


def test_upstream_pin_resolves_the_one_matching_revision_and_installs_it_exactly(apt):
    apt.set(repo=dict.fromkeys(DRV, DRV_REPO))
    out = run({"name": DRV, "upstream_version": "580.82.07"})
    # Neither -1 (Debian's rule) nor -0ubuntu1 (the previous release's): the revision the repository has.
    assert out["resolved"] == dict.fromkeys(DRV, "580.82.07-1ubuntu1")
    assert out["installed"] == [f"{n}=580.82.07-1ubuntu1" for n in DRV]
    assert apt.calls("apt-cache") == [["apt-cache", "madison", *DRV]]
    install = apt.calls("apt-get")[0]
    assert [a for a in install if "=" in a and not a.startswith("Dpkg") and "Lock" not in a] == [
        f"{n}=580.82.07-1ubuntu1" for n in DRV
    ]
    assert out["held"] == DRV
    again = run({"name": DRV, "upstream_version": "580.82.07"})
    assert again["changed"] is False and again["resolved"] == out["resolved"]
    assert len(apt.calls("apt-cache")) == 1  # installed at a matching version: the repository is not asked


def test_required_text_picks_the_build_for_the_cuda_minor(apt):
    repo = ["2.27.7-1+cuda12.8", "2.27.7-1+cuda12.9", "2.27.7-1+cuda13.0", "2.28.3-1+cuda12.9"]
    apt.set(repo=dict.fromkeys(NCCL, repo))
    out = run({"name": NCCL, "upstream_version": "2.27.7", "version_contains": "+cuda12.9"})
    assert out["resolved"] == dict.fromkeys(NCCL, "2.27.7-1+cuda12.9")
    assert apt.db()["installed"]["libnccl2"][0] == "2.27.7-1+cuda12.9"


def test_epoch_of_the_repository_is_kept_in_the_resolved_version(apt):
    apt.set(repo={"datacenter-gpu-manager-4-core": ["1:4.2.3-1", "1:4.3.1-1"]})
    out = run({"name": ["datacenter-gpu-manager-4-core"], "upstream_version": "4.2.3"})
    assert out["resolved"] == {"datacenter-gpu-manager-4-core": "1:4.2.3-1"}


def test_no_match_fails_before_any_change_listing_what_the_repository_offers(apt):
    apt.set(repo=dict.fromkeys(DRV, DRV_REPO))
    hint = "Check software.driver in the brief (nvidia_driver_version)."
    args = {"name": DRV, "upstream_version": "580.159.04", "missing_hint": hint}
    with module_args(args), pytest.raises(FailJson) as exc:
        pp.main()
    msg = exc.value.args[0]["msg"]
    for n in DRV:
        assert f"{n}: no version matches 580.159.04-*; the repositories offer {', '.join(reversed(DRV_REPO))}" in msg
    assert msg.endswith(hint)
    assert exc.value.args[0]["unavailable"] == [f"{n}=580.159.04-*" for n in DRV]
    assert apt.calls("apt-get") == [] and apt.calls("apt-mark") == []


def test_several_matches_are_an_error_naming_them(apt):
    # A re-spun build next to the first one (NVIDIA's repositories do re-spin a release, e.g. -1 then -2).
    apt.set(repo={"libnccl2": ["2.27.7-1+cuda12.9", "2.27.7-2+cuda12.9"]})
    args = {"name": ["libnccl2"], "upstream_version": "2.27.7", "version_contains": "+cuda12.9"}
    with module_args(args), pytest.raises(FailJson) as exc:
        pp.main()
    msg = exc.value.args[0]["msg"]
    assert "libnccl2: 2 versions match 2.27.7-*+cuda12.9* (2.27.7-2+cuda12.9, 2.27.7-1+cuda12.9)" in msg
    assert apt.calls("apt-get") == []


def test_unknown_package_is_named_with_none_offered(apt):
    apt.set(repo={})
    with module_args({"name": ["nvidia-imex"], "upstream_version": "580.82.07"}), pytest.raises(FailJson) as exc:
        pp.main()
    assert "nvidia-imex: no version matches 580.82.07-*; the repositories offer none" in exc.value.args[0]["msg"]


def test_unresolvable_pin_in_check_mode_is_a_warning_and_unavailable(apt, monkeypatch):
    warnings = []
    monkeypatch.setattr(pp.AnsibleModule, "warn", lambda self, msg: warnings.append(msg))
    apt.set(repo={})
    out = run({"name": NCCL, "upstream_version": "2.27.7", "version_contains": "+cuda12.9"}, check=True)
    assert out["unavailable"] == [f"{n}=2.27.7-*+cuda12.9*" for n in NCCL]
    assert out["installed"] == [f"{n}=2.27.7-*+cuda12.9*" for n in NCCL]
    assert out["resolved"] == {} and out["held"] == NCCL
    assert any("no version matches 2.27.7-*+cuda12.9*" in w for w in warnings), warnings
    assert apt.calls("apt-get") == [] and [c for c in apt.calls("apt-mark") if c[1] == "hold"] == []


def test_check_mode_resolves_and_reports_the_exact_version(apt):
    apt.set(installed={"libnccl2": ["2.26.2-1+cuda12.8", "hi "]}, repo={"libnccl2": ["2.27.7-1+cuda12.9"]})
    out = run({"name": ["libnccl2"], "upstream_version": "2.27.7", "version_contains": "+cuda12.9"}, check=True)
    assert out["resolved"] == {"libnccl2": "2.27.7-1+cuda12.9"} and out["unavailable"] == []
    assert out["installed"] == ["libnccl2=2.27.7-1+cuda12.9"]
    assert apt.calls("apt-get") == []
    assert apt.db()["installed"]["libnccl2"][0] == "2.26.2-1+cuda12.8"


def test_installed_version_of_another_release_is_replaced_by_the_resolved_one(apt):
    apt.set(
        installed={"libnccl2": ["2.27.7-1+cuda12.8", "hi "]},
        repo={"libnccl2": ["2.27.7-1+cuda12.8", "2.27.7-1+cuda12.9"]},
        holds=["libnccl2"],
    )
    out = run({"name": ["libnccl2"], "upstream_version": "2.27.7", "version_contains": "+cuda12.9"})
    assert out["installed"] == ["libnccl2=2.27.7-1+cuda12.9"]


def test_exact_versions_stay_exact_beside_upstream_pins(apt):
    apt.set(repo={"nvidia-fabricmanager": ["580.82.07-1"], "nvidia-driver-cuda": ["580.82.07-1", "580.82.07-2"]})
    out = run(
        {
            "name": ["nvidia-driver-cuda", "nvidia-fabricmanager"],
            "upstream_versions": {"nvidia-fabricmanager": "580.82.07"},
            "versions": {"nvidia-driver-cuda": "580.82.07-2"},
        }
    )
    assert out["resolved"] == {"nvidia-driver-cuda": "580.82.07-2", "nvidia-fabricmanager": "580.82.07-1"}
    assert apt.calls("apt-cache") == [
        ["apt-cache", "madison", "nvidia-fabricmanager"],
        ["apt-cache", "show", "nvidia-driver-cuda=580.82.07-2"],
    ]


def test_version_and_upstream_version_are_exclusive(apt):
    apt.set()
    with module_args({"name": NCCL, "version": "1-1", "upstream_version": "1"}), pytest.raises(FailJson) as exc:
        pp.main()
    assert "mutually exclusive" in exc.value.args[0]["msg"]
