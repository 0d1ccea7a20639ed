# Copyright: gpufleet developers
# Apache License 2.0 (see galaxy.yml)
from __future__ import annotations

DOCUMENTATION = r"""
name: scratch_plan
short_description: Decide what may be done with a node's scratch devices (consent and refusal rules)
version_added: 0.1.0
author: gpufleet developers
description:
  - Takes C(lsblk -J -p -o NAME,TYPE,FSTYPE,LABEL,MOUNTPOINT,PKNAME) output and the scratch devices, and
    returns the plan the role C(storage) follows.
  - A device on the OS disk (anything mounted on C(/), C(/boot), C(/usr), C(/var)... or swap on the same
    disk), a mounted device or a member of an active RAID array is an error, never touched even with consent.
  - A device holding partitions, a filesystem or any signature (lsblk or C(wipefs -J)) is wiped only with
    C(consent); without it each is reported (host, device, what was found) and nothing is done.
  - Devices that already are this scratch (filesystem label C(label)) are kept as they are.
  - Also C(scratch_probe_targets) (the devices and everything on them, for C(wipefs -J); without udev lsblk
    shows no filesystem, wipefs probes the device), C(mount_unit_name) (C(systemd-escape --path
    --suffix=mount)) and C(shared_mounts) (the brief's C(storage.shared) as systemd mount units).
options:
  _input:
    description: lsblk's JSON output (a dict with C(blockdevices)).
    type: dict
    required: true
  devices:
    description: The scratch devices (C(/dev/nvme1n1)...).
    type: list
    elements: str
    required: true
  host:
    description: The host's inventory name (named in the findings).
    type: str
    required: true
  path:
    description: The scratch mount point.
    type: str
    required: true
  consent:
    description: Consent to wipe devices that hold something.
    type: bool
    default: false
  signatures:
    description: Device path to its C(wipefs -J) output.
    type: dict
    default: {}
  label:
    description: Filesystem label that marks this scratch.
    type: str
    default: gf-scratch
"""

EXAMPLES = r"""
- name: Plan the scratch
  ansible.builtin.set_fact:
    _plan: >-
      {{ __lsblk.stdout | from_json | gpufleet.cluster.scratch_plan(['/dev/nvme1n1', '/dev/nvme2n1'],
         inventory_hostname, '/scratch/local', consent=false) }}

- name: Name the systemd mount unit of /shared/ckpt
  ansible.builtin.debug:
    msg: "{{ '/shared/ckpt' | gpufleet.cluster.mount_unit_name }}"  # shared-ckpt.mount
"""

RETURN = r"""
_value:
  description: The plan (scratch_plan), a unit name (mount_unit_name) or a list of mounts (shared_mounts).
  type: dict
  contains:
    action: {description: "none, mount, create, refuse (not empty, no consent), error or skip (no devices).", type: str}
    devices: {description: The scratch devices., type: list}
    target: {description: The device the filesystem is on (/dev/md/<label> for several devices)., type: str}
    wipe: {description: Devices to wipe first (partitions before their disk); empty without consent., type: list}
    create_raid: {description: Create an mdadm array of the devices., type: bool}
    mkfs: {description: Make the filesystem on target., type: bool}
    findings: {description: "One {device, found} per device that holds something.", type: list}
    violations:
      description: gpufleet violations (errors refuse the scratch; warnings are refusals without consent).
      type: list
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.cluster.plugins.module_utils.storage import plane as _storage


def scratch_plan(lsblk, devices, host, path, consent=False, signatures=None, label=_storage.DEFAULT_LABEL):
    if not isinstance(consent, bool):
        raise AnsibleFilterError(f"scratch_plan: consent must be true or false, got {consent!r}")
    try:
        return _storage.scratch_plan(
            lsblk,
            list(devices or []),
            host=str(host),
            path=str(path),
            consent=consent,
            signatures=dict(signatures or {}),
            label=str(label),
        )
    except _storage.StoragePlanError as exc:
        raise AnsibleFilterError(f"scratch_plan on {host}: {exc}") from None


def scratch_probe_targets(lsblk, devices):
    try:
        return _storage.probe_targets(lsblk, list(devices or []))
    except _storage.StoragePlanError as exc:
        raise AnsibleFilterError(f"scratch_probe_targets: {exc}") from None


def mount_unit_name(path, suffix="mount"):
    try:
        return _storage.mount_unit_name(path, suffix)
    except _storage.StoragePlanError as exc:
        raise AnsibleFilterError(f"mount_unit_name: {exc}") from None


def shared_mounts(shared, default_options):
    try:
        return _storage.shared_mounts(shared, dict(default_options or {}))
    except (_storage.StoragePlanError, KeyError) as exc:
        raise AnsibleFilterError(f"shared_mounts: {exc}") from None


class FilterModule:
    def filters(self):
        return {
            "scratch_plan": scratch_plan,
            "scratch_probe_targets": scratch_probe_targets,
            "mount_unit_name": mount_unit_name,
            "shared_mounts": shared_mounts,
        }
