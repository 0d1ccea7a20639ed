"""Files that hold secrets are written readable by their daemon only, by tasks that log nothing.

Every role task that renders a template (template, gpufleet.cluster.file_content with src) is read
from the role's task files; a template that uses a secret-carrying variable (the Alertmanager
receivers with their webhook URLs and SMTP passwords, the slurmdbd database password) must be written
with mode 0600 or 0400 by a task with ``no_log: true`` (so neither the result nor --diff shows it).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "roles"
# Variables whose value is a secret, or holds one.
SECRET_VARS = re.compile(r"\b(prometheus_alertmanager_receivers|_?slurmdbd_db_password\w*)\b")
WRITERS = ("ansible.builtin.template", "gpufleet.cluster.file_content")


def _tasks(items):
    for task in items or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _rendered_templates():
    """(role, task file, task, template path) of every task that renders a template file."""
    for tasks_file in sorted(ROLES.glob("*/tasks/*.yml")):
        role = tasks_file.parts[-3]
        for task in _tasks(yaml.safe_load(tasks_file.read_text())):
            for module in WRITERS:
                args = task.get(module)
                if isinstance(args, dict) and isinstance(args.get("src"), str) and "{{" not in args["src"]:
                    yield role, tasks_file.name, task, ROLES / role / "templates" / args["src"]


SECRET_WRITES = [
    (role, name, task)
    for role, name, task, src in _rendered_templates()
    if src.exists() and SECRET_VARS.search(src.read_text())
]


def test_the_secret_files_are_found():
    names = {task["name"] for _role, _file, task in SECRET_WRITES}
    assert {"Write alertmanager.yml (checked by amtool)", "Write slurmdbd.conf"} <= names


@pytest.mark.parametrize(("role", "tasks_file", "task"), SECRET_WRITES, ids=[t["name"] for _r, _f, t in SECRET_WRITES])
def test_a_file_with_a_secret_is_private_and_never_logged(role, tasks_file, task):
    args = next(task[m] for m in WRITERS if m in task)
    assert task.get("no_log") is True, (role, tasks_file, task["name"])
    assert str(args.get("mode")) in ("0600", "0400"), (role, tasks_file, task["name"], args.get("mode"))
    assert args.get("owner") not in (None, "root") or str(args.get("mode")) == "0400", args


def test_alertmanager_yml_belongs_to_the_account_alertmanager_runs_as():
    defaults = yaml.safe_load((ROLES / "prometheus/defaults/main.yml").read_text())
    assert defaults["prometheus_alertmanager_user"] == "prometheus"  # Debian's unit: User=prometheus
    (task,) = [t for _r, _f, t in SECRET_WRITES if t["name"].startswith("Write alertmanager.yml")]
    args = task["gpufleet.cluster.file_content"]
    assert args["owner"] == args["group"] == "{{ prometheus_alertmanager_user }}"
