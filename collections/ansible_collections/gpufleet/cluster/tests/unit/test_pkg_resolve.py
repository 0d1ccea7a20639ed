"""module_utils/common/pkg_resolve: an upstream pin matched against what apt or dnf lists.

The listings are modelled on the tools' real formats: apt-cache madison's "<package> | <version> | <URI>
<component> Packages" rows (apt's cmdline/apt-cache.cc, Madison()), and dnf 4's list columns, including the
wrapped row of a name.arch wider than its column and the epoch dnf prints when it is not 0
(dnf/cli/output.py, Output.simpleList / fmtColumns; NVIDIA's RHEL driver packages carry epoch 3, as in
{NV}/rhel9/x86_64/). Names and figures are ours.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import pkg_resolve as pr

NV = "https://developer.download.nvidia.com/compute/cuda/repos"
MADISON = f"""\
nvidia-driver-580-open | 580.95.05-0ubuntu1 | {NV}/ubuntu2404/x86_64  Packages
nvidia-driver-580-open | 580.82.07-1ubuntu1 | {NV}/ubuntu2404/x86_64  Packages
nvidia-driver-580-open | 580.82.07-1ubuntu1 | https://mirror.example.org/cuda/ubuntu2404/x86_64  Packages
nvidia-driver-580-open | 580.65.06-0ubuntu1 | {NV}/ubuntu2404/x86_64  Packages
  libnccl2 | 2.27.7-1+cuda12.9 | {NV}/debian12/x86_64  Packages
  libnccl2 | 2.27.7-1+cuda12.8 | {NV}/debian12/x86_64  Packages
  libnccl2 | 2.18.3-1 | http://deb.debian.org/debian bookworm/non-free amd64 Packages
  libnccl2 | 2.18.3-1 | http://deb.debian.org/debian bookworm/non-free Sources
"""

DNF = """\
Last metadata expiration check: 0:03:12 ago on Tue 02 Sep 2025 09:14:55 AM UTC.
Installed Packages
libnccl.x86_64                        2.26.2-1+cuda12.8                     @cuda-rhel9-x86_64
Available Packages
libnccl.x86_64                        2.26.2-1+cuda12.8                     cuda-rhel9-x86_64
libnccl.x86_64                        2.27.7-1+cuda12.9                     cuda-rhel9-x86_64
libnccl.x86_64                        2.27.7-1+cuda13.0                     cuda-rhel9-x86_64
nvidia-driver-cuda.x86_64             3:580.82.07-1.el9                     cuda-rhel9-x86_64
nvidia-driver-cuda.x86_64             3:580.95.05-1.el9                     cuda-rhel9-x86_64
kmod-nvidia-open-dkms.noarch          3:580.82.07-1.el9                     cuda-rhel9-x86_64
datacenter-gpu-manager-4-cuda12.x86_64
                                      1:4.2.3-1                             cuda-rhel9-x86_64
datacenter-gpu-manager-4-cuda12.x86_64
                                      1:4.4.1-1                             cuda-rhel9-x86_64
libnccl.src                           2.27.7-1+cuda12.9                     cuda-rhel9-source
"""


def test_madison_rows_become_versions_per_package_once_each_packages_only():
    offered = pr.parse_madison(MADISON)
    assert offered == {
        "nvidia-driver-580-open": ["580.95.05-0ubuntu1", "580.82.07-1ubuntu1", "580.65.06-0ubuntu1"],
        "libnccl2": ["2.27.7-1+cuda12.9", "2.27.7-1+cuda12.8", "2.18.3-1"],
    }


def test_dnf_list_skips_installed_and_source_rows_and_joins_wrapped_rows():
    offered = pr.parse_dnf_list(DNF)
    assert offered == {
        "libnccl": ["2.26.2-1+cuda12.8", "2.27.7-1+cuda12.9", "2.27.7-1+cuda13.0"],
        "nvidia-driver-cuda": ["3:580.82.07-1.el9", "3:580.95.05-1.el9"],
        "kmod-nvidia-open-dkms": ["3:580.82.07-1.el9"],
        "datacenter-gpu-manager-4-cuda12": ["1:4.2.3-1", "1:4.4.1-1"],
    }


def test_dnf_resolution_keeps_the_epoch_and_release():
    resolved, errors = pr.resolve_all(
        pr.parse_dnf_list(DNF),
        {"libnccl": "2.27.7", "nvidia-driver-cuda": "580.82.07", "datacenter-gpu-manager-4-cuda12": "4.2.3"},
        {"libnccl": "+cuda12.9"},
    )
    assert errors == []
    assert resolved == {
        "libnccl": "2.27.7-1+cuda12.9",
        "nvidia-driver-cuda": "3:580.82.07-1.el9",
        "datacenter-gpu-manager-4-cuda12": "1:4.2.3-1",
    }


@pytest.mark.parametrize(
    ("version", "upstream", "contains", "expected"),
    [
        ("580.82.07-1ubuntu1", "580.82.07", "", True),
        ("580.82.07", "580.82.07", "", True),
        ("580.82.071-1", "580.82.07", "", False),
        ("580.82.07.1-1", "580.82.07", "", False),
        ("1:4.2.3-1", "4.2.3", "", True),
        ("1:4.2.3-1", "1:4.2.3", "", True),
        ("2:4.2.3-1", "1:4.2.3", "", False),
        ("2.27.7-1+cuda12.9", "2.27.7", "+cuda12.9", True),
        ("2.27.7-1+cuda12.8", "2.27.7", "+cuda12.9", False),
    ],
)
def test_matches_compares_the_upstream_part_whole(version, upstream, contains, expected):
    assert pr.matches(version, upstream, contains) is expected


def test_none_and_several_are_errors_listing_the_offer():
    offered = pr.parse_madison(MADISON)
    with pytest.raises(pr.ResolveError, match=r"no version matches 580\.159\.04-\*; the repositories offer 580\.95"):
        pr.pick("nvidia-driver-580-open", offered["nvidia-driver-580-open"], "580.159.04")
    with pytest.raises(
        pr.ResolveError, match=r"2 versions match 2\.27\.7-\* \(2\.27\.7-1\+cuda12\.9, 2\.27\.7-1\+cuda12\.8\)"
    ):
        pr.pick("libnccl2", offered["libnccl2"], "2.27.7")
    resolved, errors = pr.resolve_all(offered, {"libnccl2": "2.27.7", "nvidia-imex": "580.82.07"})
    assert (
        resolved == {}
        and len(errors) == 2
        and "nvidia-imex: no version matches 580.82.07-*; the repositories offer none" in errors[1]
    )


def test_dnf_resolve_filter_returns_exact_versions_and_nevra_specs():
    from ansible_collections.gpufleet.cluster.plugins.filter import dnf_nevra as n
    from ansible_collections.gpufleet.cluster.plugins.filter import dnf_resolve as f

    resolved = f.dnf_resolve(DNF, {"libnccl": "2.27.7", "nvidia-driver-cuda": "580.82.07"}, {"libnccl": "+cuda12.9"})
    assert resolved == {"libnccl": "2.27.7-1+cuda12.9", "nvidia-driver-cuda": "3:580.82.07-1.el9"}
    assert n.dnf_nevra(resolved) == ["libnccl-2.27.7-1+cuda12.9", "nvidia-driver-cuda-3:580.82.07-1.el9"]


def test_dnf_resolve_filter_fails_naming_every_package_the_offer_and_the_hint():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpufleet.cluster.plugins.filter import dnf_resolve as f

    with pytest.raises(AnsibleFilterError) as exc:
        f.dnf_resolve(DNF, {"libnccl": "2.27.7", "nvidia-driver-cuda": "580.159.04"}, "", "Check software.nccl.")
    text = str(exc.value)
    assert "libnccl: 2 versions match 2.27.7-*" in text
    assert (
        "nvidia-driver-cuda: no version matches 580.159.04-*; the repositories offer 3:580.82.07-1.el9, 3:580.95"
        in text
    )
    assert text.endswith("Check software.nccl.")
