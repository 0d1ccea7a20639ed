"""The brief is data, never a template: a brief string holding Jinja reaches the tasks that render it
as literal text, and what it asks for never runs.

ansible-playbook runs on a local host: the brief role loads a brief whose free-text fields hold
``{{ lookup('pipe', 'touch MARKER') }}``; a template, a copy and a variable built from the brief render
those fields. A second play loads the same file with include_vars, which trusts the file's strings as
templates: there the lookup runs, which shows that the first play's check would see it run.
"""

from __future__ import annotations

import json

import pytest
import yaml
from lab_playbook import ROOT, VENV_BIN, run_local_play, write_local_play

pytestmark = pytest.mark.skipif(not (VENV_BIN / "ansible-playbook").exists(), reason="needs the project venv")

PLAY = """
- name: The brief loaded by its role, its strings rendered
  hosts: h1
  gather_facts: false
  strategy: STRATEGY
  roles: [brief]
  tasks:
    - name: Render the brief's free text with a template
      ansible.builtin.template: {src: brief.txt.j2, dest: "{{ d }}/template.txt", mode: "0644"}
    - name: Write the workload command with copy
      ansible.builtin.copy:
        content: "{{ _command }}\\n"
        dest: "{{ d }}/copy.txt"
        mode: "0644"
      vars:
        _command: "{{ gpufleet_brief.acceptance.workload.command }}"
    - name: Show the description through a fact
      ansible.builtin.set_fact:
        _description: "{{ gpufleet_brief.cluster.description }}"
    - name: Show the fact
      ansible.builtin.debug:
        msg: "{{ _description }}"

- name: The same brief through include_vars (trusted as templates)
  hosts: h1
  gather_facts: false
  strategy: STRATEGY
  tasks:
    - name: Read the brief with include_vars
      ansible.builtin.include_vars: {file: "{{ brief_file }}", name: trusted_brief}
    - name: Render the trusted copy
      ansible.builtin.copy:
        content: "{{ trusted_brief.cost.unit.name }}\\n"
        dest: "{{ d }}/trusted.txt"
        mode: "0644"
"""

TEMPLATE = "description={{ gpufleet_brief.cluster.description }}\nsource={{ gpufleet_brief.quote.source }}\n"


@pytest.mark.parametrize("strategy", ["linear", "gpufleet.cluster.linear"])
def test_jinja_in_the_brief_is_written_literally_and_never_runs(tmp_path, strategy):
    # Ansible's own strategy, and the project's default (which runs set_fact in the controller).
    play_dir = tmp_path / "play"
    play_dir.mkdir()
    (play_dir / "out").mkdir()
    markers = {k: tmp_path / f"ran-{k}" for k in ("description", "source", "command", "trusted")}

    def jinja(key):
        return "{{ lookup('pipe', 'touch " + str(markers[key]) + "') }}"

    brief = yaml.safe_load((ROOT / "inventories/lab/brief.yml").read_text())
    brief["cluster"]["description"] = "Lab " + jinja("description")
    brief.setdefault("quote", {})["source"] = jinja("source")
    brief["acceptance"]["workload"]["command"] = "echo " + jinja("command")
    brief.setdefault("cost", {"monthly": {"compute": 1}})["unit"] = {"name": jinja("trusted")}
    brief_file = tmp_path / "brief.yml"
    brief_file.write_text(yaml.safe_dump(brief, sort_keys=False))
    write_local_play(play_dir, PLAY.replace("STRATEGY", strategy), {"brief.txt.j2": TEMPLATE})

    results = run_local_play(play_dir, "-e", json.dumps({"brief_file": str(brief_file)}))

    out = play_dir / "out"
    assert (out / "template.txt").read_text() == f"description=Lab {jinja('description')}\nsource={jinja('source')}\n"
    assert (out / "copy.txt").read_text() == f"echo {jinja('command')}\n"
    assert results["Show the fact"]["msg"] == "Lab " + jinja("description")
    for key in ("description", "source", "command"):
        assert not markers[key].exists(), key
    # include_vars trusts the file: the same text is evaluated there (the lookup runs, writing nothing).
    assert markers["trusted"].exists()
    assert (out / "trusted.txt").read_text() == "\n"
