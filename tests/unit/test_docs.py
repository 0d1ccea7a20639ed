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


def _plugin_files():
    import glob

    base = os.path.join(ROOT, "collections", "ansible_collections", "gpufleet", "cluster", "plugins")
    return sorted(glob.glob(os.path.join(base, "filter", "*.py")) + glob.glob(os.path.join(base, "modules", "*.py")))


def test_every_plugin_documents_itself_in_valid_yaml():
    """ansible-doc only warns on a DOCUMENTATION block it cannot parse; this fails instead."""
    import ast

    import yaml

    bad = []
    for path in _plugin_files():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        docs = {
            t.id: node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for t in node.targets
            if isinstance(t, ast.Name) and t.id in ("DOCUMENTATION", "EXAMPLES", "RETURN")
        }
        if "DOCUMENTATION" not in docs:
            bad.append(f"{path}: no DOCUMENTATION")
            continue
        for name, text in docs.items():
            try:
                yaml.safe_load(text)
            except yaml.YAMLError as exc:
                bad.append(f"{os.path.basename(path)} {name}: {str(exc).splitlines()[0]}")
    assert _plugin_files() and not bad, "\n".join(bad)
