"""missing_packages: which requested packages dpkg says are not installed (at their version)."""

from __future__ import annotations

from ansible_collections.gpufleet.cluster.plugins.module_utils.common import packages
from ansible_collections.gpufleet.cluster.plugins.modules import missing_packages as mp

DPKG = (
    "munge\t0.5.15-2\tii \n"
    "slurmd\t22.05.8-4+deb12u3\thi \n"
    "libpmix2:amd64\t4.2.2-1+deb12u1\tii \n"
    "chrony\t4.3-2+deb12u1\trc \n"
    "perftest\t4.5-1\tiU \n"
)


def test_parse_keeps_only_installed_packages():
    assert mp.parse_dpkg(DPKG) == {
        "munge": "0.5.15-2",
        "slurmd": "22.05.8-4+deb12u3",
        "libpmix2": "4.2.2-1+deb12u1",
    }


def test_removed_half_installed_and_unknown_packages_are_missing():
    installed = mp.parse_dpkg(DPKG)
    assert mp.missing_of(["munge", "chrony", "perftest", "nosuch"], installed) == ["chrony", "perftest", "nosuch"]


def test_versions_match_exactly_or_by_prefix():
    installed = {"nvidia-smi": "570.133.20-1", "cuda-toolkit-12-8": "12.8.1-1"}
    specs = ["nvidia-smi=570.133.20-1", "nvidia-smi=570.148.08-1", "cuda-toolkit-12-8=12.8*", "cuda-toolkit-12-8=12.9*"]
    assert mp.missing_of(specs, installed) == ["nvidia-smi=570.148.08-1", "cuda-toolkit-12-8=12.9*"]


def test_split_spec():
    assert mp.split_spec("libnccl2=2.26.2-1+cuda12.8") == ("libnccl2", "2.26.2-1+cuda12.8")
    assert mp.split_spec("munge") == ("munge", None)


def test_rpm_listing():
    text = "munge\t0.5.13-1.el9\npackage nosuch is not installed\nslurm\t22.05.9-1.el9\n"
    assert mp.parse_rpm(text) == {"munge": "0.5.13-1.el9", "slurm": "22.05.9-1.el9"}


def test_an_answer_from_a_listing_is_the_modules_result():
    installed = mp.parse_dpkg(DPKG)
    assert packages.answer(["munge", "slurmd=22.05.8-4+deb12u3", "chrony", "munge=0.5.14*"], installed, "dpkg") == {
        "changed": False,
        "missing": ["chrony", "munge=0.5.14*"],
        "installed": {"munge": "0.5.15-2", "slurmd": "22.05.8-4+deb12u3"},
        "manager": "dpkg",
    }
    assert packages.wanted(["munge", "", "  ", "slurmd"]) == ["munge", "slurmd"]
