"""docs/verify-checks.md lists every check the scenarios make, and the lister finds them."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _gen():
    path = os.path.join(ROOT, "scripts", "gen_verify_table")
    loader = importlib.machinery.SourceFileLoader("gen_verify_table", path)
    spec = importlib.util.spec_from_loader("gen_verify_table", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def test_the_committed_table_is_current():
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "gen_verify_table"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr


def test_checks_are_followed_through_imports_includes_and_blocks(monkeypatch, tmp_path):
    gen = _gen()
    mol = tmp_path / "molecule"
    (mol / "s").mkdir(parents=True)
    (mol / "resources" / "tasks").mkdir(parents=True)
    (mol / "s" / "molecule.yml").write_text("scenario:\n  test_sequence: [create, converge, verify]\n")
    (mol / "s" / "converge.yml").write_text(
        "- name: C\n  hosts: all\n  tasks:\n    - name: Probe\n      ansible.builtin.command: x\n"
    )
    (mol / "s" / "verify.yml").write_text(
        "- name: Import\n  ansible.builtin.import_playbook: verify_more.yml\n"
        "- name: V\n  hosts: all\n  tasks:\n"
        "    - name: Two things hold\n      ansible.builtin.assert:\n        that: [a, b]\n"
        "    - name: Not a check\n      ansible.builtin.command: y\n      failed_when: false\n"
        "    - name: Shared\n      ansible.builtin.include_tasks: ../resources/tasks/assert-x.yml\n"
        "    - name: Helper\n      ansible.builtin.include_tasks: ../resources/tasks/helper.yml\n"
    )
    (mol / "s" / "verify_more.yml").write_text(
        "- name: M\n  hosts: all\n  tasks:\n    - block:\n        - name: Inner\n          ansible.builtin.command: z\n"
        "          failed_when: r.rc != 3\n"
    )
    (mol / "resources" / "tasks" / "helper.yml").write_text(
        "- name: From a helper\n  ansible.builtin.fail:\n    msg: no\n"
    )
    (mol / "lab").mkdir()
    (mol / "lab" / "molecule.yml").write_text("scenario:\n  test_sequence: [create, prepare]\n")
    monkeypatch.setattr(gen, "MOLECULE", str(mol))
    rows = gen.checks()
    assert [(r[2], r[3], r[4]) for r in rows] == [
        ("M", "Inner", "1"),
        ("V", "Two things hold", "2"),
        ("V", "Shared (assert-x.yml)", "-"),
        ("V", "From a helper", "1"),
    ]
    assert {r[0] for r in rows} == {"s"}
