"""paths_info: what stat and slurp say of several paths, in one call, and nothing changed."""

from __future__ import annotations

import grp
import hashlib
import os
import pwd

import pytest
from ansible_collections.gpufleet.cluster.plugins.modules import paths_info as pi
from module_helpers import failure_of, run_module


def run(paths: list, **extra) -> dict:
    return run_module(pi.main, {"paths": paths, **extra})["paths"]


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "src").mkdir(mode=0o750)
    (tmp_path / "src" / "pkg.tar.gz").write_bytes(b"\x1f\x8b not really")
    (tmp_path / "src" / "BUILD-INFO").write_text("pkg 1.0\nmake CC=gcc\n")
    (tmp_path / "plugin.so").write_bytes(b"\x7fELF")
    (tmp_path / "plugin.so").chmod(0o755)
    (tmp_path / "link.so").symlink_to(tmp_path / "plugin.so")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    return tmp_path


def test_each_path_is_described_as_stat_would_with_the_checksum_and_text_asked(tree):
    src, so = str(tree / "src"), str(tree / "plugin.so")
    found = run(
        [
            src,
            {"path": f"{src}/pkg.tar.gz", "checksum": "sha256"},
            {"path": f"{src}/BUILD-INFO", "read": True},
            {"path": so, "checksum": "sha1"},
        ]
    )
    me, group = pwd.getpwuid(os.getuid())[0], grp.getgrgid(os.getgid())[0]
    assert found[src] == {"exists": True, "type": "directory", "mode": "0750", "owner": me, "group": group,
                          "size": os.stat(src).st_size}  # fmt: skip
    assert found[f"{src}/pkg.tar.gz"]["checksum"] == hashlib.sha256(b"\x1f\x8b not really").hexdigest()
    assert "text" not in found[f"{src}/pkg.tar.gz"]
    assert found[f"{src}/BUILD-INFO"]["text"] == "pkg 1.0\nmake CC=gcc\n"
    assert "checksum" not in found[f"{src}/BUILD-INFO"]
    assert found[so]["checksum"] == hashlib.sha1(b"\x7fELF").hexdigest()
    assert (found[so]["mode"], found[so]["type"], found[so]["size"]) == ("0755", "file", 4)


def test_a_missing_path_a_dangling_link_and_a_path_under_a_file_do_not_exist(tree):
    paths = [str(tree / "nothing"), str(tree / "dangling"), str(tree / "plugin.so" / "below")]
    assert run(paths) == {p: {"exists": False} for p in paths}


def test_a_link_is_followed_to_what_it_points_to(tree):
    found = run([{"path": str(tree / "link.so"), "checksum": "sha1"}])[str(tree / "link.so")]
    assert (found["type"], found["mode"], found["checksum"]) == ("file", "0755", hashlib.sha1(b"\x7fELF").hexdigest())


def test_a_file_larger_than_the_limit_is_not_read(tree):
    found = run([{"path": str(tree / "src" / "BUILD-INFO"), "read": True}], read_limit=8)
    assert found[str(tree / "src" / "BUILD-INFO")]["too_large"] is True
    assert "text" not in found[str(tree / "src" / "BUILD-INFO")]


def test_nothing_changes_and_check_mode_answers_the_same(tree):
    before = {p: os.stat(p, follow_symlinks=False).st_mtime_ns for p in tree.rglob("*")}
    args = {"paths": [{"path": str(tree / "src" / "BUILD-INFO"), "read": True, "checksum": "sha512"}]}
    plain, check = run_module(pi.main, args), run_module(pi.main, args, check=True)
    assert plain == check and plain["changed"] is False
    assert before == {p: os.stat(p, follow_symlinks=False).st_mtime_ns for p in tree.rglob("*")}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"checksum": "sha1"}, "paths[0] must be a path or a mapping with path"),
        ({"path": "/etc/hostname", "mode": "0644"}, "paths[0] (/etc/hostname): unsupported keys ['mode']"),
        ({"path": "/etc/hostname", "checksum": "md5"}, "checksum is sha1, sha256 or sha512, not 'md5'"),
    ],
)
def test_a_wrong_entry_is_refused_naming_it(entry, message):
    assert message in failure_of(pi.main, {"paths": [entry]})
