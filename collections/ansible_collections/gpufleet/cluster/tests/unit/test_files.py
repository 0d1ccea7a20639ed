"""files (the module): one call compares every directory and text and sets what differs; texts that differ are
written only from the files the action plugin puts on the host, each after its validate command."""

from __future__ import annotations

import os

import pytest
from ansible_collections.gpufleet.cluster.plugins.modules import files as fm
from module_helpers import failure_of, mode_of, run_module, sha1_text

OLD = "alpha\n"
NEW = "beta\n"


sha1 = sha1_text


def run(args: dict, check: bool = False, diff: bool = False) -> dict:
    return run_module(fm.main, args, check=check, diff=diff)


def failure(args: dict) -> str:
    return failure_of(fm.main, args)


@pytest.fixture
def tree(tmp_path):
    """A configured tree: etc/ (0755) holding a.conf (OLD, 0644) and b.conf (OLD, 0600)."""
    etc = tmp_path / "etc"
    etc.mkdir()
    etc.chmod(0o755)
    for name, mode in (("a.conf", 0o644), ("b.conf", 0o600)):
        (etc / name).write_text(OLD)
        (etc / name).chmod(mode)
    return tmp_path


def spec(tree, a: str = OLD, b: str = OLD, **extra) -> dict:
    return {
        "directories": [{"path": str(tree / "etc"), "mode": "0755"}],
        "files": [
            {"dest": str(tree / "etc" / "a.conf"), "_checksum": sha1(a)},
            {"dest": str(tree / "etc" / "b.conf"), "_checksum": sha1(b), "mode": "0600"},
        ],
        "mode": "0644",
        **extra,
    }


def source(tmp_path, name: str, text: str) -> str:
    path = tmp_path / "tmpdir" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return str(path)


def test_everything_as_wanted_changes_nothing_in_one_call(tree):
    before = os.stat(tree / "etc" / "a.conf").st_mtime_ns
    out = run(spec(tree), diff=True)
    assert out["changed"] is False and "content_wanted" not in out and out["diffs"] == []
    assert [r["changed"] for r in out["results"]] == [False, False, False]
    assert os.stat(tree / "etc" / "a.conf").st_mtime_ns == before


def test_a_text_that_differs_asks_for_it_and_touches_nothing_else(tree):
    (tree / "etc").chmod(0o700)
    out = run(spec(tree, b=NEW))
    assert out == {"changed": False, "content_wanted": [1]}
    assert mode_of(tree / "etc") == "0700" and (tree / "etc" / "b.conf").read_text() == OLD


def test_the_second_call_writes_the_text_and_sets_every_attribute(tree):
    (tree / "etc").chmod(0o700)
    (tree / "etc" / "a.conf").chmod(0o600)
    src = source(tree, ".source1.conf", NEW)
    out = run({**spec(tree, b=NEW), "_sources": {"1": src}}, diff=True)
    assert out["changed"] is True
    assert [r["changed"] for r in out["results"]] == [True, True, True]
    assert (tree / "etc" / "b.conf").read_text() == NEW and mode_of(tree / "etc" / "b.conf") == "0600"
    assert mode_of(tree / "etc") == "0755" and mode_of(tree / "etc" / "a.conf") == "0644"
    assert {"index": 1, "diff_before": {"before_header": str(tree / "etc" / "b.conf"), "before": OLD}} in out["diffs"]
    assert any(d.get("index") == 0 and d["after"]["mode"] == "0644" for d in out["diffs"])


@pytest.mark.parametrize("validate, written", [("grep -q beta %s", True), ("grep -q gamma %s", False)])
def test_a_validate_command_guards_its_own_file(tree, validate, written):
    args = spec(tree, b=NEW)
    args["files"][1]["validate"] = validate
    args["_sources"] = {"1": source(tree, ".source1.conf", NEW)}
    if written:
        assert run(args)["changed"] is True
    else:
        assert "failed to validate" in failure(args)
    assert (tree / "etc" / "b.conf").read_text() == (NEW if written else OLD)


def test_missing_directories_are_created_with_their_parents_and_attributes(tmp_path):
    deep = tmp_path / "opt" / "app" / "conf"
    out = run(
        {
            "directories": [{"path": str(deep)}],
            "files": [{"dest": str(deep / "x.conf"), "_checksum": sha1(NEW)}],
            "directory_mode": "0750",
            "mode": "0640",
            "_sources": {"0": source(tmp_path, ".source0.conf", NEW)},
        },
        diff=True,
    )
    assert out["changed"] is True
    for path in (tmp_path / "opt", tmp_path / "opt" / "app", deep):
        assert mode_of(path) == "0750", path
    assert (deep / "x.conf").read_text() == NEW and mode_of(deep / "x.conf") == "0640"
    created = {"before": {"path": str(deep), "state": "absent"}, "after": {"path": str(deep), "state": "directory"}}
    assert out["diffs"][0] == created


def test_check_mode_reports_every_change_and_touches_nothing(tmp_path, tree):
    missing = tmp_path / "new"
    (tree / "etc" / "a.conf").chmod(0o600)
    args = spec(tree, b=NEW)
    args["directories"].append({"path": str(missing)})
    out = run(args, check=True, diff=True)
    assert "content_wanted" not in out and out["changed"] is True
    assert [r["changed"] for r in out["results"]] == [False, True, True, True]
    assert not missing.exists() and mode_of(tree / "etc" / "a.conf") == "0600"
    assert (tree / "etc" / "b.conf").read_text() == OLD
    assert {"index": 1, "diff_before": {"before_header": str(tree / "etc" / "b.conf"), "before": OLD}} in out["diffs"]


def test_a_file_where_a_directory_is_wanted_fails_by_name(tree):
    msg = failure({"directories": [{"path": str(tree / "etc" / "a.conf")}]})
    assert "a.conf exists and is not a directory" in msg


def test_a_directory_where_a_file_is_wanted_fails_by_name(tree):
    msg = failure({"files": [{"dest": str(tree / "etc"), "_checksum": sha1(NEW)}]})
    assert "is a directory" in msg and str(tree / "etc") in msg


@pytest.mark.parametrize("check", [False, True])
def test_an_absent_file_is_removed_unless_checking_and_needs_no_text(tree, check):
    gone = tree / "etc" / "a.conf"
    out = run({"files": [{"dest": str(gone), "state": "absent"}]}, check=check, diff=True)
    assert out["changed"] is True and out["results"] == [{"path": str(gone), "changed": True}]
    removed = {"before": {"path": str(gone), "state": "file"}, "after": {"path": str(gone), "state": "absent"}}
    assert out["diffs"] == [removed]
    assert gone.exists() is check
    if not check:
        assert run({"files": [{"dest": str(gone), "state": "absent"}]})["changed"] is False


def test_an_absent_link_is_removed_and_its_target_kept(tree):
    link = tree / "etc" / "link.conf"
    link.symlink_to(tree / "etc" / "a.conf")
    assert run({"files": [{"dest": str(link), "state": "absent"}]})["changed"] is True
    assert not os.path.lexists(link) and (tree / "etc" / "a.conf").read_text() == OLD


def test_a_directory_where_a_file_should_be_absent_fails_and_stays(tree):
    msg = failure({"files": [{"dest": str(tree / "etc"), "state": "absent"}]})
    assert "is a directory" in msg and (tree / "etc" / "a.conf").exists()
