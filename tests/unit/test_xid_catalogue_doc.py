"""docs/xid-catalogue.md is generated from module_utils/ops/xid_catalogue.py and must be current."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_xid_catalogue_doc"


def test_xid_catalogue_doc_is_up_to_date():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_the_check_fails_on_a_stale_doc(tmp_path):
    """A copy of the repository's script and doc with one row edited by hand: --check must say so."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "docs").mkdir()
    shutil.copy(SCRIPT, tmp_path / "scripts")
    (tmp_path / "collections").symlink_to(ROOT / "collections")
    doc = (ROOT / "docs" / "xid-catalogue.md").read_text()
    assert "| 79 |" in doc
    (tmp_path / "docs" / "xid-catalogue.md").write_text(doc.replace("| 79 |", "| 97 |"))
    copy = tmp_path / "scripts" / "gen_xid_catalogue_doc"
    proc = subprocess.run([sys.executable, str(copy), "--check"], capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "out of date" in proc.stderr
    assert subprocess.run([sys.executable, str(copy)], check=False).returncode == 0
    assert (tmp_path / "docs" / "xid-catalogue.md").read_text() == doc
