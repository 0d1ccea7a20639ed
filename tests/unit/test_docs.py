"""Generated documentation stays in step with the code it documents."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_brief_field_tables_match_the_schema():
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "gen_brief_doc"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_readme_roles_table_matches_the_roles():
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "gen_roles_doc"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
