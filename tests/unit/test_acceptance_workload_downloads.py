"""The workload's downloads: which lie on a shared file system (one node downloads them), and which
nodes are refused for not seeing a file another node downloaded there.

The role's own templates are rendered (roles/acceptance/vars/main.yml and the refusing task of
tasks/workload_files.yml), with the brief and registered results such a run gives."""

from __future__ import annotations

import pytest
import yaml
from role_vars import ENV, ROOT, role_vars

SHA = "a" * 64


def brief(dataset: str, weights: str | None = None, shared: list[str] | None = None) -> dict:
    workload = {"command": "train", "dataset": dataset, "dataset_url": "http://files/ds.csv", "dataset_sha256": SHA}
    if weights:
        workload.update(weights=weights, weights_url="http://files/w.json", weights_sha256=SHA)
    out = {"acceptance": {"workload": workload}}
    if shared is not None:
        mounts = [{"server": "nfs01", "export": "/export", "path": p, "type": "nfs"} for p in shared]
        out["storage"] = {"shared": mounts}
    return out


def downloads(b: dict) -> list[dict]:
    return role_vars("acceptance", {"os_family": "Debian"}, b)["_acceptance_workload_downloads"]


def test_without_shared_file_systems_every_download_is_each_nodes_own():
    got = downloads(brief("/var/lib/gpufleet/ds.csv", "/var/lib/gpufleet/w.json"))
    assert [(d["path"], d["shared"]) for d in got] == [
        ("/var/lib/gpufleet/ds.csv", ""),
        ("/var/lib/gpufleet/w.json", ""),
    ]
    assert got[0]["url"] == "http://files/ds.csv" and got[0]["sha256"] == SHA


@pytest.mark.parametrize(
    ("path", "mounts", "shared"),
    [
        ("/shared/data/ds.csv", ["/shared"], "/shared"),
        ("/shared/data/ds.csv", ["/shared/"], "/shared/"),
        ("/shared/data/ds.csv", ["/shared", "/shared/data"], "/shared/data"),
        ("/shared/data/ds.csv", ["/shared/data", "/shared"], "/shared/data"),
        # A path beside a mount whose name it starts with is not on it.
        ("/shared2/ds.csv", ["/shared"], ""),
        ("/scratch/ds.csv", ["/shared", "/home"], ""),
    ],
)
def test_a_download_is_on_the_innermost_shared_mount_it_lies_under(path, mounts, shared):
    (got,) = downloads(brief(path, shared=mounts))
    assert got["shared"] == shared


def test_the_dataset_may_be_shared_and_the_weights_not():
    got = downloads(brief("/shared/ds.csv", "/var/lib/gpufleet/w.json", shared=["/shared"]))
    assert [d["shared"] for d in got] == ["/shared", ""]


def _refusal_template() -> str:
    tasks = yaml.safe_load((ROOT / "roles/acceptance/tasks/workload_files.yml").read_text())
    (task,) = [t for t in tasks if t["name"] == "Refuse a node that does not see the shared downloads"]
    return task["vars"]["_acceptance_shared_unseen"]


def unseen(seen_results: list[dict], downloaded: list[dict] | None = None, check: bool = False) -> list[str]:
    template = ENV.from_string(_refusal_template())
    return template.render(
        __acceptance_shared_seen={"results": seen_results},
        __acceptance_shared_downloaded={
            "results": [r["item"] for r in seen_results] if downloaded is None else downloaded
        },
        ansible_check_mode=check,
    )


def _seen(path: str, here: dict, there: dict) -> dict:
    """One item of the node's stat loop: its own stat, and the downloading node's result it looped over."""
    return {"stat": here, "item": {"stat": there, "item": {"path": path, "shared": "/shared"}}}


def test_a_node_that_sees_the_same_file_is_not_refused():
    there = {"exists": True, "size": 1200, "mtime": 1764850000.25}
    assert unseen([_seen("/shared/ds.csv", dict(there), there)]) == []


def test_a_node_without_the_file_or_with_another_is_refused_naming_path_and_mount():
    there = {"exists": True, "size": 1200, "mtime": 1764850000.25}
    got = unseen(
        [
            _seen("/shared/ds.csv", {"exists": False}, there),
            _seen("/shared/w.json", {"exists": True, "size": 0, "mtime": 1764849.0}, there),
        ]
    )
    assert got == [
        "/shared/ds.csv (on /shared): missing here",
        "/shared/w.json (on /shared): 0 bytes modified at 1764849.0 here, 1200 bytes modified at 1764850000.25"
        " on the node that downloaded it",
    ]


def test_a_file_of_the_same_size_but_another_time_is_another_file():
    there = {"exists": True, "size": 1200, "mtime": 1764850000.25}
    got = unseen([_seen("/shared/ds.csv", {"exists": True, "size": 1200, "mtime": 1764800000.0}, there)])
    assert got == [
        "/shared/ds.csv (on /shared): 1200 bytes modified at 1764800000.0 here, 1200 bytes modified at"
        " 1764850000.25 on the node that downloaded it"
    ]


def test_without_shared_downloads_nothing_is_refused():
    assert unseen([]) == []


def test_a_download_missing_after_its_node_was_lost_is_refused_but_not_in_a_preview():
    # The node that downloaded was lost (unreachable): the look ran on the next node, which found
    # nothing, and no node was asked whether it sees the file.
    lost = {"stat": {"exists": False}, "item": {"path": "/shared/ds.csv", "shared": "/shared"}}
    assert unseen([], downloaded=[lost]) == [
        "/shared/ds.csv (on /shared): not there after the download (the node that downloaded it failed or was lost)"
    ]
    # A preview only previews the download: nothing is there yet.
    assert unseen([], downloaded=[lost], check=True) == []
