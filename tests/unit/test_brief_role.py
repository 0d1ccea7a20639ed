"""roles/brief: each host loads the brief once per run, and again only for another brief_file.

Runs ansible-playbook on the lab inventory: the role connects to no host (include_vars, set_fact and
group_by run on the controller), so the lab need not be up.
"""

from __future__ import annotations

import re

import pytest
from lab_playbook import HAVE_VENV, ROOT, run_lab_playbook

PLAYBOOK = """
- name: First stage
  hosts: all
  gather_facts: false
  roles: [brief]

- name: Second stage, same brief
  hosts: all
  gather_facts: false
  roles: [brief]
  tasks:
    - name: Show the pool and group
      ansible.builtin.debug:
        msg: "POOL {{ inventory_hostname }} {{ gpufleet_pool.name | default('-') }} {{ _group }}"
      vars:
        _group: "{{ 'gpu' if inventory_hostname in groups['gpufleet_gpu_nodes'] else 'other' }}"

- name: Third stage, another brief
  hosts: all
  gather_facts: false
  vars:
    brief_file: "{{ other_brief }}"
  roles: [brief]
  tasks:
    - name: Show the pool
      ansible.builtin.debug:
        msg: "OTHER {{ inventory_hostname }} {{ gpufleet_pool.name | default('-') }}"
"""


@pytest.mark.skipif(not HAVE_VENV, reason="needs the project venv")
def test_brief_loaded_once_per_run_and_again_for_another_file(tmp_path):
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    other = tmp_path / "other-brief.yml"
    text = (ROOT / "inventories/lab/brief.yml").read_text()
    name = re.search(r"^\s*- name: (\S+)", text.split("pools:", 1)[1], re.M).group(1)
    other.write_text(text.replace(f"name: {name}", "name: renamed-pool", 1))
    proc = run_lab_playbook(tmp_path / "play.yml", "-e", f"other_brief={other}", cwd=tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-2000:]
    # Read in the first stage and the third (another path), not in the second.
    assert out.count("TASK [brief : Read the topology brief]") == 2, out
    assert "POOL lab-gpu01 " + name + " gpu" in out
    assert "POOL lab-ctl01 - other" in out
    assert "OTHER lab-gpu01 renamed-pool" in out
