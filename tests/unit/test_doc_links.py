"""Every relative link of the README, docs/ and the roles' READMEs points at a file that exists and,
with a #fragment, at a heading of that file (GitHub's anchors), so moving a section cannot leave a
link behind."""

from __future__ import annotations

import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, markup and punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*]|\[|\]\([^)]*\)", "", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: str) -> set[str]:
    with open(path, encoding="utf-8") as fh:
        text = FENCE.sub("", fh.read())
    seen: dict[str, int] = {}
    out = set()
    for line in text.splitlines():
        m = re.match(r"^#{1,6}\s+(.*)$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def documents() -> list[str]:
    files = [os.path.join(ROOT, "README.md")]
    files += glob.glob(os.path.join(ROOT, "docs", "*.md"))
    files += glob.glob(os.path.join(ROOT, "roles", "*", "README.md"))
    return sorted(files)


def broken_links(path: str) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        text = FENCE.sub("", fh.read())
    bad = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue  # http:, https:, mailto:
        file_part, _, fragment = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.exists(dest):
            bad.append(f"{target}: no such file")
        elif fragment and dest.endswith(".md") and fragment not in anchors(dest):
            bad.append(f"{target}: no heading #{fragment}")
    return bad


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("When `provision` measures the acceptance again", "when-provision-measures-the-acceptance-again"),
        ("Driver drift: the runbook", "driver-drift-the-runbook"),
        ("lab up|down|status", "lab-updownstatus"),
    ],
)
def test_slug_follows_github(heading, anchor):
    assert slug(heading) == anchor


def test_a_link_to_a_moved_section_is_caught(tmp_path):
    (tmp_path / "a.md").write_text("# A\n\n## Kept\n")
    (tmp_path / "b.md").write_text("[ok](a.md#kept) [gone](a.md#moved) [none](c.md) [self](#b)\n\n# B\n")
    assert broken_links(str(tmp_path / "b.md")) == ["a.md#moved: no heading #moved", "c.md: no such file"]


@pytest.mark.parametrize("path", documents(), ids=lambda p: os.path.relpath(p, ROOT))
def test_every_relative_link_resolves(path):
    assert broken_links(path) == []
