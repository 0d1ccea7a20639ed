"""key_values: several key = value settings of a file set in one read and at most one write, as one
lineinfile per key would set them; comments and other lines untouched."""

from __future__ import annotations

import os

import pytest
from ansible_collections.gpufleet.cluster.plugins.modules import key_values as kv
from module_helpers import failure_of, run_module

AUDITD = """#
# This file controls the configuration of the audit daemon
#

local_events = yes
max_log_file = 8
num_logs = 5
# space_left_action = SYSLOG
space_left_action=SYSLOG
admin_space_left_action = SUSPEND
"""

WANTED = {"max_log_file": 32, "num_logs": 5, "space_left_action": "EMAIL", "disk_full_action": "HALT"}


@pytest.fixture
def conf(tmp_path):
    path = tmp_path / "auditd.conf"
    path.write_text(AUDITD)
    path.chmod(0o640)
    return path


def run(path, values=None, check=False, diff=False, **extra):
    return run_module(kv.main, {"path": str(path), "values": values or WANTED, **extra}, check=check, diff=diff)


def test_settings_are_replaced_in_place_and_a_missing_one_is_added_at_the_end(conf):
    result = run(conf)
    assert result["changed"] and result["changed_keys"] == ["max_log_file", "space_left_action", "disk_full_action"]
    lines = conf.read_text().splitlines()
    assert lines[:5] == AUDITD.splitlines()[:5]
    assert "max_log_file = 32" in lines and "num_logs = 5" in lines
    # The commented line stays a comment; the active one (written without spaces) is set.
    assert "# space_left_action = SYSLOG" in lines and "space_left_action = EMAIL" in lines
    assert "space_left_action=SYSLOG" not in lines
    assert lines[-1] == "disk_full_action = HALT" and lines[-2] == "admin_space_left_action = SUSPEND"
    assert oct(os.stat(conf).st_mode & 0o777) == "0o640"


def test_a_second_run_changes_nothing_and_does_not_write(conf):
    run(conf)
    written = os.stat(conf).st_mtime_ns
    result = run(conf)
    assert not result["changed"] and result["changed_keys"] == []
    assert os.stat(conf).st_mtime_ns == written


def test_check_mode_with_diff_shows_the_change_and_writes_nothing(conf):
    result = run(conf, check=True, diff=True)
    assert result["changed"] and conf.read_text() == AUDITD
    assert result["diff"]["before"] == AUDITD and "disk_full_action = HALT\n" in result["diff"]["after"]


def test_the_same_as_one_lineinfile_per_key(conf, tmp_path):
    """lineinfile's rule per key, written out: the matching line replaced, else the line appended."""
    run(conf)
    expected = AUDITD.replace("max_log_file = 8", "max_log_file = 32").replace(
        "space_left_action=SYSLOG", "space_left_action = EMAIL"
    )
    assert conf.read_text() == expected + "disk_full_action = HALT\n"


def test_a_file_without_a_last_newline_and_booleans(tmp_path):
    path = tmp_path / "x.conf"
    path.write_text("a = 1")
    run(path, {"b": True, "c": False})
    assert path.read_text() == "a = 1\nb = yes\nc = no\n"


def test_a_missing_file_fails_but_is_a_change_in_check_mode(tmp_path):
    missing = tmp_path / "auditd.conf"
    assert "does not exist: install the package that owns it first" in failure_of(
        kv.main, {"path": str(missing), "values": WANTED}
    )
    assert run(missing, check=True)["changed"] and not missing.exists()


def test_a_key_that_is_not_a_name_is_refused(conf):
    assert "key 'a b' is not a setting's name" in failure_of(kv.main, {"path": str(conf), "values": {"a b": 1}})
    assert conf.read_text() == AUDITD
