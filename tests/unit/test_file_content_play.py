"""gpufleet.cluster.file_content writes what ansible.builtin.template and ansible.builtin.copy write, and
reports the same changes, diffs and handlers, on a first run, a re-run, a preview (--check --diff) and a
mode changed behind Ansible's back.

ansible-playbook runs one play on a local host: each file is written once by the builtin module and once
by file_content, side by side, and the JSON callback's results are compared.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from lab_playbook import VENV_BIN, run_local_play, write_local_play

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

TEMPLATE = """{{ ansible_managed | comment }}
{% for n in range(2) %}
line {{ n }} says {{ greeting }}
{% endfor %}
{% include 'part.j2' %}
"""
PART = "included for {{ inventory_hostname }}\n"

PLAY = """
- name: Builtins and file_content side by side
  hosts: h1
  gather_facts: false
  vars:
    greeting: hello
    file_mode: "0644"
  tasks:
    - name: Builtin template
      ansible.builtin.template: {src: app.conf.j2, dest: "{{ d }}/builtin/app.conf", mode: "{{ file_mode }}"}
    - name: Template
      gpufleet.cluster.file_content: {src: app.conf.j2, dest: "{{ d }}/ours/app.conf", mode: "{{ file_mode }}"}
      notify: Template changed
    - name: Builtin copy
      ansible.builtin.copy:
        content: "greeting={{ greeting }}\\n"
        dest: "{{ d }}/builtin/plain.conf"
        mode: "0640"
        validate: grep -q greeting= %s
    - name: Content
      gpufleet.cluster.file_content:
        content: "greeting={{ greeting }}\\n"
        dest: "{{ d }}/ours/plain.conf"
        mode: "0640"
        validate: grep -q greeting= %s
      notify: Content changed
    - name: Secret
      gpufleet.cluster.file_content: {content: "password={{ greeting }}\\n", dest: "{{ d }}/ours/secret", mode: "0600"}
      no_log: true
  handlers:
    - name: Template changed
      ansible.builtin.debug: {msg: template}
    - name: Content changed
      ansible.builtin.debug: {msg: content}
"""

PAIRS = {"Template": "Builtin template", "Content": "Builtin copy"}


@pytest.fixture
def play(tmp_path):
    write_local_play(tmp_path, PLAY, {"app.conf.j2": TEMPLATE, "part.j2": PART})
    for side in ("builtin", "ours"):
        (tmp_path / "out" / side).mkdir(parents=True)
    return tmp_path


run = run_local_play


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def content_diff(result: dict) -> tuple[str, str]:
    """The text's before and after of a result's diff (a list or one dict)."""
    diffs = result["diff"] if isinstance(result["diff"], list) else [result["diff"]]
    texts = [d for d in diffs if isinstance(d.get("after"), str)]
    assert len(texts) == 1, diffs
    return texts[0].get("before", ""), texts[0]["after"]


def test_the_first_run_writes_what_the_builtins_write_and_notifies(play):
    results = run(play)
    out = play / "out"
    for name in ("app.conf", "plain.conf"):
        assert (out / "ours" / name).read_bytes() == (out / "builtin" / name).read_bytes(), name
        assert mode(out / "ours" / name) == mode(out / "builtin" / name), name
    assert "line 1 says hello" in (out / "ours" / "app.conf").read_text()
    assert "included for h1" in (out / "ours" / "app.conf").read_text()
    assert mode(out / "ours" / "secret") == 0o600
    for ours, builtin in PAIRS.items():
        assert results[ours]["changed"] is True and results[builtin]["changed"] is True
    assert "Template changed" in results and "Content changed" in results


def test_a_re_run_changes_nothing_and_notifies_nothing(play):
    run(play)
    results = run(play)
    assert not any(r.get("changed") for r in results.values()), results
    assert "Template changed" not in results and "Content changed" not in results


def test_a_preview_shows_the_builtins_diff_and_writes_nothing(play):
    run(play)
    before = (play / "out" / "ours" / "app.conf").read_bytes()
    results = run(play, "--check", "--diff", "-e", "greeting=goodbye")
    for ours, builtin in PAIRS.items():
        assert results[ours]["changed"] is True, ours
        assert content_diff(results[ours]) == content_diff(results[builtin]), ours
    assert "says goodbye" in content_diff(results["Template"])[1]
    assert (play / "out" / "ours" / "app.conf").read_bytes() == before
    secret = results["Secret"]
    assert secret["changed"] is True
    assert "censored" in secret  # no_log: Ansible drops the result, the diff with it
    assert "hello" not in json.dumps(secret) and "goodbye" not in json.dumps(secret)


def test_a_changed_text_is_written_and_notifies(play):
    run(play)
    results = run(play, "-e", "greeting=goodbye")
    assert results["Template"]["changed"] is True and "Template changed" in results
    out = play / "out"
    assert (out / "ours" / "app.conf").read_bytes() == (out / "builtin" / "app.conf").read_bytes()
    assert "says goodbye" in (out / "ours" / "app.conf").read_text()


def test_a_mode_changed_behind_ansibles_back_is_previewed_then_restored(play):
    run(play)
    out = play / "out"
    for side in ("builtin", "ours"):
        (out / side / "app.conf").chmod(0o600)
    results = run(play, "--check", "--diff")
    assert results["Template"]["changed"] is True and results["Builtin template"]["changed"] is True
    diffs = results["Template"]["diff"]
    assert diffs[0]["before"]["mode"] == "0600" and diffs[0]["after"]["mode"] == "0644"
    assert mode(out / "ours" / "app.conf") == 0o600
    results = run(play)
    assert results["Template"]["changed"] is True and "Template changed" in results
    assert mode(out / "ours" / "app.conf") == mode(out / "builtin" / "app.conf") == 0o644
