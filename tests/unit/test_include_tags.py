"""A tagged `include_tasks` runs what it includes under its tags.

A dynamic include's own tags select the include task, not the tasks it includes: those carry the
tags of the blocks around the include, of `apply`, and their own. An include tagged `t` whose file
has no task that `t` (or `always`) selects runs nothing under `--tags t`, silently (an acceptance
run with `--tags acceptance_single` that measures the nodes and drains none of the bad ones). This
reads every role's tasks files and every playbook and names each such include and tag.
"""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
_INCLUDES = ("ansible.builtin.include_tasks", "include_tasks")
_BLOCK_KEYS = ("block", "rescue", "always")


def _tags(task: dict) -> set[str]:
    value = task.get("tags") or []
    return {value} if isinstance(value, str) else {str(v) for v in value}


def _load(path: Path) -> list:
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh) or []


def _leaf_tags(items: list, inherited: set[str]) -> list[set[str]]:
    """The tags of every task (not block) in ``items``, with those of the blocks around it."""
    out: list[set[str]] = []
    for task in items or []:
        if not isinstance(task, dict):
            continue
        tags = inherited | _tags(task)
        if any(key in task for key in _BLOCK_KEYS):
            for key in _BLOCK_KEYS:
                out += _leaf_tags(task.get(key) or [], tags)
        else:
            out.append(tags)
    return out


def _task_lists(path: Path) -> list:
    """A tasks file's tasks, or a playbook's plays' tasks, handlers included."""
    data = _load(path)
    if path.parent.name != "playbooks":
        return data
    return [
        t
        for play in data
        if isinstance(play, dict)
        for k in ("pre_tasks", "tasks", "post_tasks", "handlers")
        for t in play.get(k) or []
    ]


def silent_includes(paths: list[Path]) -> list[str]:
    """'file: include name -> included file: tag' for each tag under which an include runs nothing."""
    found: list[str] = []

    def walk(path: Path, items: list, parent: set[str]) -> None:
        for task in items or []:
            if not isinstance(task, dict):
                continue
            tags = parent | _tags(task)
            for key in _BLOCK_KEYS:
                if key in task:
                    walk(path, task[key], tags)
            arg = next((task[k] for k in _INCLUDES if k in task), None)
            if arg is None:
                continue
            name = arg if isinstance(arg, str) else arg.get("file") or arg.get("_raw_params")
            wanted = tags - {"always"}
            if not wanted or not name or "{{" in str(name):
                continue
            applied = _tags(arg["apply"]) if isinstance(arg, dict) and isinstance(arg.get("apply"), dict) else set()
            included = path.parent / name
            if not included.is_file():
                found.append(
                    f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
                    f"{task.get('name')} -> {name}: no such file"
                )
                continue
            inner = _leaf_tags(_load(included), parent | applied)
            for tag in sorted(wanted):
                if not any(tag in t or "always" in t for t in inner):
                    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                    found.append(f"{where}: {task.get('name')} -> {name}: {tag}")

    for path in paths:
        walk(path, _task_lists(path), set())
    return found


def test_every_tagged_include_runs_something_under_its_tags():
    paths = sorted(ROOT.glob("roles/*/tasks/*.yml")) + sorted(ROOT.glob("playbooks/*.yml"))
    assert len(paths) > 100
    assert silent_includes(paths) == []


def test_the_check_finds_an_include_whose_tags_reach_nothing(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "inner.yml").write_text("- name: untagged\n  ansible.builtin.debug: {msg: x}\n")
    (tasks / "half.yml").write_text("- name: b only\n  ansible.builtin.debug: {msg: x}\n  tags: [b]\n")
    (tasks / "main.yml").write_text(
        "- name: own tags only\n  ansible.builtin.include_tasks: inner.yml\n  tags: [a]\n"
        "- name: with apply\n  ansible.builtin.include_tasks:\n    file: inner.yml\n    apply: {tags: [a]}\n"
        "  tags: [a]\n"
        "- name: a block's tags reach it\n  tags: [a]\n  block:\n"
        "    - name: inside\n      ansible.builtin.include_tasks: inner.yml\n"
        "- name: half\n  ansible.builtin.include_tasks: half.yml\n  tags: [a, b]\n"
    )
    assert silent_includes([tasks / "main.yml"]) == [
        f"{tasks / 'main.yml'}: own tags only -> inner.yml: a",
        f"{tasks / 'main.yml'}: half -> half.yml: a",
    ]
