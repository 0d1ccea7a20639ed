"""The CLI shows its own lines, not the Python warnings of its dependencies, unless -v is given.

A library that Ansible imports can start warning on every run after a release (cryptography's
``CryptographyDeprecationWarning``, a ``UserWarning`` subclass, when ansible-core imports its DSA
support). Here a stand-in library does the same from a ``sitecustomize`` module on the children's
``PYTHONPATH``, so that every Python the CLI starts warns at start-up as such a library would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from gpufleet_cli import pywarnings
from gpufleet_cli.main import main
from gpufleet_cli.runner import RunOptions, runner_kwargs

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "collections/ansible_collections/gpufleet/cluster/tests/unit/fixtures/preflight/broken"
WARNING_TEXT = "the stand-in library's old key type is deprecated"


@pytest.fixture
def warning_library(tmp_path, monkeypatch):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "sitecustomize.py").write_text(
        "import warnings\n"
        "class LibraryDeprecationWarning(UserWarning):\n"
        "    pass\n"
        f"warnings.warn({WARNING_TEXT!r}, LibraryDeprecationWarning)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(lib))
    monkeypatch.delenv("PYTHONWARNINGS", raising=False)
    # The state pywarnings keeps for the process is put back after each test.
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    monkeypatch.setitem(pywarnings._state, "show", False)


@pytest.fixture
def ini_site(tmp_path) -> Path:
    """A site whose inventory Ansible itself reads (INI): the CLI's child Python does the reading."""
    site = tmp_path / "site"
    site.mkdir()
    shutil.copy(BROKEN / "brief.yml", site / "brief.yml")
    (site / "hosts").write_text("[gpu]\nnode01 ansible_host=10.0.0.1\n")
    return site


def test_the_stand_in_library_does_warn(warning_library):
    """The premise: a Python started with that path prints the warning, as the real library did."""
    proc = subprocess.run([sys.executable, "-c", "pass"], capture_output=True, text=True, check=True)
    assert WARNING_TEXT in proc.stderr and "LibraryDeprecationWarning" in proc.stderr


def test_a_dependencys_warning_in_the_inventory_reader_is_hidden(warning_library, ini_site, capsys):
    rc = main(["preflight", "-i", str(ini_site)])
    out, err = capsys.readouterr()
    assert rc in (0, 1), err
    assert "preflight" in out, out
    assert WARNING_TEXT not in err and WARNING_TEXT not in out


def test_with_v_the_dependencys_warning_is_shown(warning_library, ini_site, capsys):
    rc = main(["preflight", "-i", str(ini_site), "-v"])
    err = capsys.readouterr().err
    assert rc in (0, 1), err
    assert WARNING_TEXT in err


def test_a_pythonwarnings_the_user_set_is_kept(warning_library, monkeypatch):
    assert pywarnings.child_env({}) == {"PYTHONWARNINGS": "ignore"}
    monkeypatch.setenv("PYTHONWARNINGS", "error")
    # Not overridden: the child inherits the user's setting from the environment.
    assert pywarnings.child_env({}) == {}


def test_playbook_runs_get_the_same_rule(warning_library):
    opts = RunOptions(inventory="inv")
    env = runner_kwargs("site.yml", "inv", opts, "/tmp/p", "id")["envvars"]
    assert env["PYTHONWARNINGS"] == "ignore"
    pywarnings.configure(1)
    env = runner_kwargs("site.yml", "inv", opts, "/tmp/p", "id")["envvars"]
    assert "PYTHONWARNINGS" not in env


def _warn_from(filename: str) -> None:
    warnings.warn_explicit(WARNING_TEXT, UserWarning, filename, 7, registry={})


def test_in_process_a_dependencys_warning_shows_only_with_v(warning_library, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        pywarnings.configure(0)
        _warn_from("/usr/lib/python3/dist-packages/somelib/keys.py")
        assert WARNING_TEXT not in capsys.readouterr().err
        pywarnings.configure(1)
        _warn_from("/usr/lib/python3/dist-packages/somelib/keys.py")
        assert WARNING_TEXT in capsys.readouterr().err


def test_in_process_gpufleets_own_warning_is_always_shown(warning_library, capsys):
    own = os.path.join(ROOT, "scripts", "gpufleet_cli", "cmd_preflight.py")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        pywarnings.configure(0)
        _warn_from(own)
        assert WARNING_TEXT in capsys.readouterr().err
