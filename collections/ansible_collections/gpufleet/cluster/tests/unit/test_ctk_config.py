"""Splitting `nvidia-ctk runtime configure --runtime=containerd --dry-run` output into containerd's files.

Fixtures: fixtures/ctk/dry-run-<toolkit>.toml, what the dry run prints on stdout (go-toml's
layout: root keys first, table keys indented). 1.17 prints the whole config.toml; 1.18 prints the
drop-in, then the top-level config that imports it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.filter.ctk_config import FilterModule
from ansible_collections.gpufleet.cluster.plugins.module_utils.container.ctk_config import split_dry_run

FIXTURES = Path(__file__).parent / "fixtures" / "ctk"


def read(name: str) -> str:
    # Ansible's registered stdout has no trailing newline.
    return (FIXTURES / name).read_text().rstrip("\n")


def test_toolkit_1_17_output_is_the_config_unchanged():
    stdout = read("dry-run-1.17.5.toml")
    assert split_dry_run(stdout) == {"drop_in": "", "top_level": stdout}


def test_toolkit_1_18_output_is_a_drop_in_then_the_top_level_config():
    parts = split_dry_run(read("dry-run-1.18.0.toml"))
    drop_in, top = tomllib.loads(parts["drop_in"]), tomllib.loads(parts["top_level"])
    cri = drop_in["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert cri["enable_cdi"] is True
    assert top["imports"] == ["/etc/containerd/config.d/*.toml"]
    assert "nvidia" not in str(top)
    assert not parts["drop_in"].endswith("\n") and not parts["top_level"].startswith("\n")


@pytest.mark.parametrize(
    "text",
    [
        # A key of a table written unindented (containerd's own style) is not a second document:
        # what follows does not import a drop-in.
        '[plugins."io.containerd.grpc.v1.cri"]\nenable_cdi = true\n',
        "version = 2\n",
        "",
    ],
)
def test_one_document_whatever_its_layout(text):
    assert split_dry_run(text) == {"drop_in": "", "top_level": text}


@pytest.mark.parametrize("text", ['level=error msg="unable to load config"', "[plugins\nx = 1", None])
def test_not_toml_is_an_error(text):
    with pytest.raises(ValueError, match=r"TOML|text"):
        split_dry_run(text)
    with pytest.raises(AnsibleFilterError, match="ctk_dry_run_split"):
        FilterModule().filters()["ctk_dry_run_split"](text)
