# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: accelerator
short_description: Look up an accelerator in gpufleet's catalogue
version_added: 0.1.0
author: gpufleet developers
description:
  - Returns the catalogue entry of an accelerator key as a dictionary (nvidia-smi name, memory,
    architecture, form factor, MIG profiles, NVLink generation and ceiling, expected single-node
    busbw, minimum driver branch and CUDA).
  - Returns an empty dictionary for an unknown or empty key, so it can be used on hosts outside
    any pool.
options:
  _input:
    description: A catalogue key such as C(h100-sxm-80gb).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Show the H100 SXM entry
  ansible.builtin.debug:
    msg: "{{ 'h100-sxm-80gb' | gpufleet.cluster.accelerator }}"

- name: Expected nvidia-smi name of this host's pool
  ansible.builtin.debug:
    msg: "{{ (gpufleet_pool.accelerator | default('') | gpufleet.cluster.accelerator).nvidia_smi_name | default('') }}"
"""

RETURN = r"""
_value:
  description: The catalogue entry, or an empty dictionary when the key is unknown or empty.
  type: dict
  contains:
    key: {description: Catalogue key., type: str}
    nvidia_smi_name: {description: Name nvidia-smi prints., type: str}
    memory_mib: {description: memory.total as nvidia-smi reports it (MiB)., type: int}
    architecture: {description: ampere, ada, hopper or blackwell., type: str}
    form_factor: {description: sxm, pcie or superchip., type: str}
    mig: {description: Whether the GPU supports MIG., type: bool}
    mig_profiles: {description: MIG profiles such as 1g.10gb., type: list, elements: str}
    nvlink_generation: {description: NVLink generation, null without NVLink., type: int}
    nvlink_busbw_gbps: {description: Per-GPU unidirectional NVLink GB/s (single-node busbw ceiling)., type: float}
    expected_single_node_busbw_gbps: {description: Default single-node all_reduce busbw floor (GB/s)., type: float}
    min_driver_branch: {description: Oldest driver branch supporting the GPU (e.g. 570)., type: int}
    min_cuda: {description: Oldest CUDA supporting the GPU., type: str}
    pcie_gbps: {description: Unidirectional PCIe x16 bandwidth (GB/s)., type: float}
    open_kernel_modules_required: {description: True when only the open kernel modules drive the GPU., type: bool}
    nvidia_smi_aliases: {description: Other names some drivers print., type: list, elements: str}
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.brief.catalogue import accelerator_dict


def accelerator(key):
    if key is None:
        return {}
    if not isinstance(key, str):
        raise AnsibleFilterError(
            f"gpufleet.cluster.accelerator expects a catalogue key (string), got {type(key).__name__}"
        )
    return accelerator_dict(str(key))


class FilterModule:
    def filters(self):
        return {"accelerator": accelerator}
