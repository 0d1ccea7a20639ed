"""gpufleet.cluster.files creates what ansible.builtin.file (state=directory), template and copy create, and
reports the same changes, diffs and handlers, on a first run, a re-run, a preview (--check --diff), a text or a
mode changed behind Ansible's back, and a loop whose item the templates read.

ansible-playbook runs one play on a local host: the builtins write one tree, one files task per loop item the
other, and the JSON callback's results are compared.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from lab_playbook import VENV_BIN, ansible_env, run_local_play, write_local_play

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

TEMPLATE = """{{ ansible_managed | comment }}
{{ item }} says {{ greeting }}
"""

PLAY = """
- name: Builtins and files side by side
  hosts: h1
  gather_facts: false
  vars:
    greeting: hello
  tasks:
    - name: Builtin directory
      ansible.builtin.file: {path: "{{ d }}/builtin/{{ item }}/conf", state: directory, mode: "0750"}
      loop: [one, two]
    - name: Builtin template
      ansible.builtin.template: {src: app.conf.j2, dest: "{{ d }}/builtin/{{ item }}/conf/app.conf", mode: "0644"}
      loop: [one, two]
    - name: Builtin copy
      ansible.builtin.copy:
        content: "greeting={{ greeting }}\\n"
        dest: "{{ d }}/builtin/{{ item }}/conf/plain.conf"
        mode: "0640"
        validate: grep -q greeting= %s
      loop: [one, two]
    - name: Files
      gpufleet.cluster.files:
        directories:
          - {path: "{{ d }}/ours/{{ item }}/conf", mode: "0750"}
        files:
          - {src: app.conf.j2, dest: "{{ d }}/ours/{{ item }}/conf/app.conf"}
          - dest: "{{ d }}/ours/{{ item }}/conf/plain.conf"
            content: "greeting={{ greeting }}\\n"
            mode: "0640"
            validate: grep -q greeting= %s
          # Written only with -e extra=...; its template reads that variable, so it is never rendered without it.
          - src: extra.j2
            dest: "{{ d }}/ours/{{ item }}/conf/extra.conf"
            state: "{{ 'present' if extra is defined else 'absent' }}"
        mode: "0644"
      loop: [one, two]
      notify: Files changed
    - name: Secret
      gpufleet.cluster.files:
        files: [{content: "password={{ greeting }}\\n", dest: "{{ d }}/ours/secret", mode: "0600"}]
      no_log: true
  handlers:
    - name: Files changed
      ansible.builtin.debug: {msg: files}
"""


@pytest.fixture
def play(tmp_path):
    write_local_play(tmp_path, PLAY, {"app.conf.j2": TEMPLATE, "extra.j2": "{{ extra }}\n"})
    for side in ("builtin", "ours"):
        (tmp_path / "out" / side).mkdir(parents=True)
    return tmp_path


run = run_local_play


def tree(root: Path) -> dict[str, tuple[int, bytes | None]]:
    """Every path under root with its mode and, for a file, its bytes."""
    out = {}
    for path in sorted(root.rglob("*")):
        text = None if path.is_dir() else path.read_bytes()
        out[str(path.relative_to(root))] = (stat.S_IMODE(os.stat(path).st_mode), text)
    return out


def item_diffs(result: dict) -> list[dict]:
    return [d for r in result["results"] for d in (r.get("diff") or [])]


def test_the_first_run_makes_the_builtins_tree_and_notifies(play):
    results = run(play)
    out = play / "out"
    assert tree(out / "ours") == {**tree(out / "builtin"), "secret": (0o600, b"password=hello\n")}
    assert b"two says hello" in (out / "ours" / "two" / "conf" / "app.conf").read_bytes()
    assert all(r["changed"] for r in results["Files"]["results"])
    assert "Files changed" in results


def test_a_re_run_changes_nothing_and_notifies_nothing(play):
    run(play)
    results = run(play)
    assert not any(r.get("changed") for r in results.values()), results
    assert "Files changed" not in results


def test_a_preview_shows_the_builtins_text_diffs_and_writes_nothing(play):
    run(play)
    before = tree(play / "out" / "ours")
    results = run(play, "--check", "--diff", "-e", "greeting=goodbye")
    ours = [(d["before"], d["after"]) for d in item_diffs(results["Files"])]
    builtin = [(d["before"], d["after"]) for t in ("Builtin template", "Builtin copy") for d in item_diffs(results[t])]
    assert sorted(ours) == sorted(builtin) and len(ours) == 4
    assert tree(play / "out" / "ours") == before
    secret = results["Secret"]
    assert secret["changed"] is True and "censored" in secret
    assert "goodbye" not in json.dumps(secret)


def test_a_text_and_a_mode_changed_behind_ansibles_back_are_restored_and_notify(play):
    run(play)
    out = play / "out"
    (out / "ours" / "one" / "conf" / "app.conf").write_text("edited\n")
    (out / "ours" / "two" / "conf").chmod(0o755)
    results = run(play)
    assert [r["changed"] for r in results["Files"]["results"]] == [True, True]
    assert "Files changed" in results
    assert tree(out / "ours")["one/conf/app.conf"] == tree(out / "builtin")["one/conf/app.conf"]
    assert tree(out / "ours")["two/conf"][0] == 0o750


def test_an_absent_item_is_removed_when_its_condition_turns_and_is_never_rendered(play):
    run(play)
    extra = play / "out" / "ours" / "one" / "conf" / "extra.conf"
    results = run(play, "-e", "extra=more")
    assert extra.read_text() == "more\n" and "Files changed" in results
    results = run(play)
    assert not extra.exists() and "Files changed" in results
    assert not any(r.get("changed") for r in run(play).values())


# One template written once per rail: the builtin template loops over the rails, files takes each rail as its
# file's vars. A file of a rail that is gone is removed in the same task.
RAILS_PLAY = """
- name: One template per rail
  hosts: h1
  gather_facts: false
  vars:
    rails: "{{ rail_names | map('community.general.dict_kv', 'name') | list }}"
    tag: fabric
  tasks:
    - name: Builtin template
      ansible.builtin.template: {src: rail.j2, dest: "{{ d }}/builtin/{{ rail.name }}.network", mode: "0644"}
      loop: "{{ rails }}"
      loop_control: {loop_var: rail}
    - name: Files
      gpufleet.cluster.files:
        files: >-
          {{ rails | map('community.general.dict_kv', 'rail') | map('community.general.dict_kv', 'vars')
             | zip(rails | map(attribute='name') | map('regex_replace', '^(.*)$', d ~ '/ours/\\1.network')
                   | map('community.general.dict_kv', 'dest'))
             | map('combine', {'src': 'rail.j2'}) | list
             + (gone | map('regex_replace', '^(.*)$', d ~ '/ours/\\1.network')
                | map('community.general.dict_kv', 'dest') | map('combine', {'state': 'absent'}) | list) }}
        mode: "0644"
"""


@pytest.fixture
def rails_play(tmp_path):
    write_local_play(tmp_path, RAILS_PLAY, {"rail.j2": "[Match]\nName={{ rail.name }}\n# {{ tag }}\n"})
    for side in ("builtin", "ours"):
        (tmp_path / "out" / side).mkdir(parents=True)
    return tmp_path


def rails_run(play: Path, names: list[str], gone: list[str] = ()) -> dict[str, dict]:
    return run(play, "-e", json.dumps({"rail_names": names, "gone": list(gone)}))


def test_each_file_renders_the_template_with_its_own_vars_as_a_loop_would(rails_play):
    results = rails_run(rails_play, ["rail0", "rail1", "rail2"])
    ours = tree(rails_play / "out" / "ours")
    assert ours == tree(rails_play / "out" / "builtin")
    assert ours["rail1.network"][1].endswith(b"Name=rail1\n# fabric\n")
    assert [r["changed"] for r in results["Files"]["results"]] == [True, True, True]
    assert not any(r.get("changed") for r in rails_run(rails_play, ["rail0", "rail1", "rail2"]).values())


def test_a_file_of_a_rail_that_is_gone_is_removed_in_the_same_task(rails_play):
    rails_run(rails_play, ["rail0", "rail1", "rail2"])
    results = rails_run(rails_play, ["rail0", "rail1"], gone=["rail2"])
    assert sorted(os.listdir(rails_play / "out" / "ours")) == ["rail0.network", "rail1.network"]
    assert [r["changed"] for r in results["Files"]["results"]] == [False, False, True]


def test_vars_without_a_template_is_refused_before_the_host_is_touched(tmp_path):
    write_local_play(
        tmp_path,
        """
- name: Vars with content
  hosts: h1
  gather_facts: false
  tasks:
    - name: Files
      gpufleet.cluster.files:
        files: [{content: "x", dest: "{{ d }}/x", vars: {a: 1}}]
""",
        {},
    )
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts", "play.yml", "-e", f"d={tmp_path / 'out'}"]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 2
    result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["h1"]
    assert "vars (a mapping) is for a template (src)" in result["msg"]
    assert not (tmp_path / "out").exists()


def test_a_dest_named_twice_is_refused_before_the_host_is_touched(rails_play):
    env = ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json")
    (rails_play / "play.yml").write_text(RAILS_PLAY.replace("'/ours/\\1.network'", "'/ours/same.network'"))
    argv = [str(VENV_BIN / "ansible-playbook"), "-i", "hosts", "play.yml", "-e", f"d={rails_play / 'out'}"]
    argv += ["-e", json.dumps({"rail_names": ["rail0", "rail1"], "gone": []})]
    proc = subprocess.run(argv, cwd=rails_play, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 2
    tasks = json.loads(proc.stdout)["plays"][0]["tasks"]
    assert "files names a dest more than once: " in tasks[-1]["hosts"]["h1"]["msg"]
    assert os.listdir(rails_play / "out" / "ours") == []
