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


def test_role_readmes_and_their_index_match_the_roles():
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "gen_roles_doc"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def _gen_roles_doc():
    import importlib.machinery
    import importlib.util

    path = os.path.join(ROOT, "scripts", "gen_roles_doc")
    loader = importlib.machinery.SourceFileLoader("gen_roles_doc", path)
    spec = importlib.util.spec_from_loader("gen_roles_doc", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def test_a_role_readme_names_each_variable_its_default_entry_points_and_tags(tmp_path):
    gen = _gen_roles_doc()
    role = tmp_path / "roles" / "demo"
    _write(
        str(role / "meta" / "argument_specs.yml"),
        "argument_specs:\n"
        "  main:\n"
        "    short_description: Demo main\n"
        "    options:\n"
        "      demo_port: {type: int, description: Port it listens on.}\n"
        "  extra:\n"
        "    short_description: Demo extra\n"
        "    options:\n"
        "      demo_only_extra: {type: str, description: Taken by extra alone.}\n",
    )
    _write(str(role / "meta" / "main.yml"), "galaxy_info:\n  description: A demo role\n")
    _write(str(role / "defaults" / "main.yml"), "demo_port: 8080\ndemo_only_extra: x\n")
    task = "- name: One\n  ansible.builtin.debug: {}\n  tags: [demo_configure, always]\n"
    _write(str(role / "tasks" / "main.yml"), task)
    files = gen.render(str(tmp_path))
    readme = files[os.path.join("roles", "demo", "README.md")]
    assert "# Role `demo`\n\nA demo role\n" in readme
    assert "| `demo_port` | `8080` | Port it listens on. |" in readme
    assert "| `demo_only_extra` | `x` | Taken by extra alone. (entry point `extra`) |" in readme
    assert "| `extra` | Demo extra |" in readme
    assert "## Tags\n\n`demo_configure`\n" in readme
    assert "| [`demo`](../roles/demo/README.md) | A demo role | 2 | `demo_configure` |" in files["docs/roles.md"]


def test_the_check_names_a_role_readme_left_behind_by_its_defaults(tmp_path):
    gen = _gen_roles_doc()
    role = tmp_path / "roles" / "demo"
    _write(
        str(role / "meta" / "argument_specs.yml"),
        "argument_specs:\n  main:\n    options:\n      demo_port: {type: int, description: Port.}\n",
    )
    _write(str(role / "defaults" / "main.yml"), "demo_port: 8080\n")
    assert gen.stale(str(tmp_path)) == ["roles/demo/README.md (missing)", "docs/roles.md (missing)"]
    for rel, text in gen.render(str(tmp_path)).items():
        _write(str(tmp_path / rel), text)
    assert gen.stale(str(tmp_path)) == []
    _write(str(role / "defaults" / "main.yml"), "demo_port: 9090\n")
    assert gen.stale(str(tmp_path)) == ["roles/demo/README.md"]


def _plugin_files():
    import glob

    base = os.path.join(ROOT, "collections", "ansible_collections", "gpufleet", "cluster", "plugins")
    kinds = ("filter", "modules", "strategy", "cache")
    return sorted(path for kind in kinds for path in glob.glob(os.path.join(base, kind, "*.py")))


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
