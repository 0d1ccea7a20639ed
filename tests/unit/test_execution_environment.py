"""execution-environment.yml: ansible-builder accepts it, and it pins what requirements.txt pins.

``ansible-builder create`` only writes the build context (no registry, no container engine).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EE = ROOT / "execution-environment.yml"
BUILDER = Path(sys.executable).parent / "ansible-builder"


def pins(lines: list[str]) -> dict[str, str]:
    """``name==version`` lines → {normalized name: version}."""
    out = {}
    for line in lines:
        m = re.match(r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^\s;#]+)", line)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(3)
    return out


@pytest.fixture(scope="module")
def ee() -> dict:
    return yaml.safe_load(EE.read_text())


@pytest.fixture(scope="module")
def context(tmp_path_factory) -> Path:
    builder = BUILDER if BUILDER.exists() else shutil.which("ansible-builder")
    if not builder:
        pytest.skip("ansible-builder is not installed (make venv)")
    ctx = tmp_path_factory.mktemp("ee") / "context"
    proc = subprocess.run(
        [str(builder), "create", "-f", str(EE), "-c", str(ctx)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return ctx


def test_context_is_generated(context, ee):
    containerfile = (context / "Containerfile").read_text()
    assert f'EE_BASE_IMAGE="{ee["images"]["base_image"]["name"]}"' in containerfile
    assert 'PYCMD="/usr/bin/python3.11"' in containerfile
    for name in ("requirements.txt", "requirements.yml", "bindep.txt"):
        assert (context / "_build" / name).is_file(), name


def test_python_requirements_copied_and_pinned_like_requirements_txt(context, ee):
    toolchain = pins((ROOT / "requirements.txt").read_text().splitlines())
    ee_python = (context / "_build/requirements.txt").read_text().splitlines()
    assert ee_python == ee["dependencies"]["python"]
    for name, version in pins(ee_python).items():
        assert toolchain.get(name) == version, f"{name}: EE pins {version}, requirements.txt {toolchain.get(name)}"
    for key, name in (("ansible_core", "ansible-core"), ("ansible_runner", "ansible-runner")):
        assert ee["dependencies"][key]["package_pip"] == f"{name}=={toolchain[name]}"
    # What the plugins import on the controller must be in the EE.
    assert {"netaddr", "pyyaml", "jinja2", "matplotlib"} <= set(pins(ee_python))


def test_collections_are_the_repository_requirements(context):
    assert (context / "_build/requirements.yml").read_bytes() == (ROOT / "collections/requirements.yml").read_bytes()


def test_system_packages_are_bindep(context, ee):
    lines = (context / "_build/bindep.txt").read_text().splitlines()
    assert lines == ee["dependencies"]["system"]
    assert all(re.match(r"^[A-Za-z0-9_.+\-]+ \[platform:rpm( compile)?\]$", line) for line in lines), lines
    assert "openssh-clients [platform:rpm]" in lines
