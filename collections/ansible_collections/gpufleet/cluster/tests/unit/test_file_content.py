"""file_content (the module): one call compares the text's checksum and sets the attributes; a text that
differs is written only from the file the action plugin puts on the host, after its validate command."""

from __future__ import annotations

import os

import pytest
from ansible_collections.gpufleet.cluster.plugins.modules import file_content as fc
from module_helpers import failure_of, mode_of, run_module, sha1_text

OLD = "alpha\n"
NEW = "beta\n"


sha1 = sha1_text


def run(args: dict, check: bool = False, diff: bool = False) -> dict:
    return run_module(fc.main, args, check=check, diff=diff)


def failure(args: dict) -> str:
    return failure_of(fc.main, args)


@pytest.fixture
def dest(tmp_path):
    path = tmp_path / "app.conf"
    path.write_text(OLD)
    path.chmod(0o644)
    return path


def source(tmp_path, text: str):
    path = tmp_path / "tmpdir" / ".source.conf"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_the_same_text_and_mode_change_nothing(dest):
    before = os.stat(dest)
    out = run({"dest": str(dest), "_checksum": sha1(OLD), "mode": "0644"}, diff=True)
    assert out["changed"] is False
    assert "content_wanted" not in out and "diff_before" not in out and "diff_attributes" not in out
    assert dest.read_text() == OLD and os.stat(dest).st_mtime_ns == before.st_mtime_ns


@pytest.mark.parametrize("check", [False, True])
def test_a_mode_that_differs_is_a_change_with_its_diff_and_set_unless_checking(dest, check):
    out = run({"dest": str(dest), "_checksum": sha1(OLD), "mode": "0600"}, check=check, diff=True)
    assert out["changed"] is True
    assert out["diff_attributes"]["before"]["mode"] == "0644"
    assert out["diff_attributes"]["after"]["mode"] == "0600"
    assert mode_of(dest) == ("0644" if check else "0600")
    assert dest.read_text() == OLD


def test_a_text_that_differs_asks_for_the_text_and_touches_nothing(dest):
    out = run({"dest": str(dest), "_checksum": sha1(NEW), "mode": "0600"})
    assert out["content_wanted"] is True and out["changed"] is False
    assert dest.read_text() == OLD and mode_of(dest) == "0644"


def test_check_mode_reports_a_text_that_differs_with_the_text_before(dest):
    out = run({"dest": str(dest), "_checksum": sha1(NEW)}, check=True, diff=True)
    assert out["changed"] is True and "content_wanted" not in out
    assert out["diff_before"] == {"before_header": str(dest), "before": OLD}
    assert dest.read_text() == OLD


def test_check_mode_reports_a_missing_file_even_where_its_directory_is_missing(tmp_path):
    missing = tmp_path / "not-yet" / "app.conf"
    out = run({"dest": str(missing), "_checksum": sha1(NEW)}, check=True, diff=True)
    assert out["changed"] is True and out["diff_before"] == {"before": ""}
    assert not missing.parent.exists()


def test_the_text_is_written_from_the_source_with_owner_group_and_mode(tmp_path, dest):
    src = source(tmp_path, NEW)
    out = run({"dest": str(dest), "_checksum": sha1(NEW), "_source": str(src), "mode": "0600"}, diff=True)
    assert out["changed"] is True
    assert dest.read_text() == NEW and mode_of(dest) == "0600"
    assert not src.exists()  # moved into place
    assert out["diff_before"]["before"] == OLD
    assert "diff_attributes" not in out  # as ansible.builtin.copy: the text's diff only


def test_a_new_file_is_created(tmp_path):
    new = tmp_path / "new.conf"
    src = source(tmp_path, NEW)
    out = run({"dest": str(new), "_checksum": sha1(NEW), "_source": str(src), "mode": "0640"})
    assert out["changed"] is True and new.read_text() == NEW and mode_of(new) == "0640"


def test_a_failing_validate_leaves_the_file_as_it_was(tmp_path, dest):
    src = source(tmp_path, NEW)
    args = {"dest": str(dest), "_checksum": sha1(NEW), "_source": str(src), "validate": "grep -q alpha %s"}
    assert "failed to validate" in failure(args)
    assert dest.read_text() == OLD


def test_validate_sees_the_new_text_and_its_mode(tmp_path, dest):
    src = source(tmp_path, NEW)
    validate = 'sh -c \'grep -q beta "$1" && test "$(stat -c %%a "$1")" = 600\' _ %s'
    out = run({"dest": str(dest), "_checksum": sha1(NEW), "_source": str(src), "mode": "0600", "validate": validate})
    assert out["changed"] is True and dest.read_text() == NEW


def test_validate_without_the_file_placeholder_fails(tmp_path, dest):
    src = source(tmp_path, NEW)
    args = {"dest": str(dest), "_checksum": sha1(NEW), "_source": str(src), "validate": "true"}
    assert "must contain %s" in failure(args)
    assert dest.read_text() == OLD


def test_a_missing_directory_fails_when_writing(tmp_path):
    src = source(tmp_path, NEW)
    missing = tmp_path / "not-yet" / "app.conf"
    args = {"dest": str(missing), "_checksum": sha1(NEW), "_source": str(src)}
    assert "does not exist" in failure(args)


def test_a_link_at_dest_is_replaced_by_a_file_even_with_the_same_text(tmp_path, dest):
    link = tmp_path / "link.conf"
    link.symlink_to(dest)
    assert run({"dest": str(link), "_checksum": sha1(OLD)})["content_wanted"] is True
    src = source(tmp_path, OLD)
    out = run({"dest": str(link), "_checksum": sha1(OLD), "_source": str(src)})
    assert out["changed"] is True and not link.is_symlink() and link.read_text() == OLD
    assert dest.read_text() == OLD


def test_a_directory_as_dest_fails(tmp_path):
    assert "is a directory" in failure({"dest": str(tmp_path), "_checksum": sha1(NEW)})


def test_the_diff_leaves_out_a_binary_or_large_file(tmp_path):
    binary = tmp_path / "blob"
    binary.write_bytes(b"\x00\x01")
    assert fc.before_diff(str(binary), 1000) == {"dst_binary": 1}
    large = tmp_path / "large"
    large.write_text("x" * 2000)
    assert fc.before_diff(str(large), 1000) == {"dst_larger": 1000}
    assert fc.before_diff(str(tmp_path / "absent"), 1000) == {"before": ""}
