"""The child Python of ``gpufleet preflight`` (``cmd_preflight.ansible_read``): Ansible's own inventory.

Run as ``python -m gpufleet_cli.inventory_child``, so that Ansible's configuration (ANSIBLE_CONFIG) and
plugin loader stay out of the CLI's process, which only reads the JSON this prints. It imports nothing of
the collection itself: Ansible's collection loader, set up by ``init_plugin_loader``, loads what the
inventory's plugins need (the collection's cache plugin), and a module of the collection imported before
it would stand without its collection metadata. The tests reach it through ``ansible_read`` only.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import re
import sys
from typing import Any

from ansible import constants as C
from ansible.cli import CLI
from ansible.cli.inventory import InventoryCLI
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.parsing.vault import EncryptedString
from ansible.plugins.loader import init_plugin_loader
from ansible.utils.display import Display
from ansible.vars.manager import VariableManager

from .common import ROOT

# Values _plain may make for one inventory: YAML aliases let a few hundred bytes stand for billions.
MAX_VALUES = 5_000_000


class TooManyValues(Exception):
    """An inventory whose variables expand to more than MAX_VALUES values (an alias bomb)."""


def _plain(
    value: Any, encrypted: type, vault: list[bool], placeholder: str, depth: int = 0, budget: list[int] | None = None
) -> Any:
    """Ansible's tagged values as plain JSON data, as the playbook's preflight filter hands them to the
    checks (never templated). A vault-encrypted value that cannot be decrypted becomes the placeholder
    the direct reader uses (``--vault-placeholder``), and ``vault[0]`` is set. ``budget[0]``: values
    left to make; TooManyValues when it runs out."""
    if depth > 20:
        return None
    if budget is not None:
        budget[0] -= 1
        if budget[0] < 0:
            raise TooManyValues(
                f"its variables expand to more than {MAX_VALUES} values, expected fewer (a YAML alias bomb?)"
            )
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, encrypted):
        try:
            return str(value)
        except Exception:  # no vault secret, or the wrong one
            vault[0] = True
            return placeholder
    if isinstance(value, dict):
        return {str(k): _plain(v, encrypted, vault, placeholder, depth + 1, budget) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, encrypted, vault, placeholder, depth + 1, budget) for v in value]
    return str(value)


def main() -> None:  # pragma: no cover - runs in the child Python
    """``--keys K1,K2|* --vault-placeholder TEXT SOURCE...`` → a JSON list on stdout, one result per source
    (see ``cmd_preflight.ansible_read``)."""
    args = sys.argv[1:]
    keys = None if args[1] == "*" else set(filter(None, args[1].split(",")))
    placeholder = args[3]
    # This process only builds the inventory, prints it and exits: the cyclic garbage collector
    # would walk the whole growing inventory again and again (a quarter of the time at 16,384
    # hosts) to free almost nothing, so it stays off; the memory goes back when the process ends.
    gc.disable()
    init_plugin_loader()
    failures: list[str] = []

    def collect(msg, exception, **_kw):
        # Ansible reports this way each plugin that tried a source and failed, before it gives up on it.
        m = re.search(r"'([^']+)'", str(msg or ""))
        plugin = re.sub(r"^ansible_collections\.(\w+\.\w+)\.plugins\.inventory\.", r"\1.", m.group(1)) if m else "?"
        # The help text holds what the source said (an inventory script's standard error).
        help_text = getattr(exception, "_help_text", None)
        failures.append(f"{plugin} plugin: {exception}" + (f" {help_text.strip()}" if help_text else ""))

    Display().error_as_warning = collect
    enabled = [str(p) for p in C.INVENTORY_ENABLED]
    out = []
    for source in args[4:]:
        failures.clear()
        try:
            loader = DataLoader()
            # The preflight playbook's directory: playbook-relative group_vars/ apply as they do there.
            loader.set_basedir(os.path.join(ROOT, "playbooks"))
            # A configured vault password (ANSIBLE_VAULT_PASSWORD_FILE, ...) decrypts as in a playbook; without
            # one, encrypted values are reported, not read.
            with contextlib.suppress(Exception):
                CLI.setup_vault_secrets(loader, vault_ids=list(C.DEFAULT_VAULT_IDENTITY_LIST), auto_prompt=False)
            inventory = InventoryManager(loader=loader, sources=[source])
            vm = VariableManager(loader=loader, inventory=inventory)
            groups = {str(g): [str(h) for h in hs] for g, hs in inventory.get_groups_dict().items()}
            hostvars, vault_hosts = {}, []
            budget = [MAX_VALUES]
            for host in inventory.get_hosts():
                # What ansible-inventory --list prints for the host: every group's and the host's own.
                hv = InventoryCLI._remove_internal(vm.get_vars(host=host, include_hostvars=False, stage="all"))
                vault = [False]
                hostvars[str(host.name)] = {
                    str(k): _plain(v, EncryptedString, vault, placeholder, budget=budget)
                    for k, v in hv.items()
                    if keys is None or k in keys
                }
                if vault[0]:
                    vault_hosts.append(str(host.name))
            out.append({"source": source, "groups": groups, "hostvars": hostvars, "vault_hosts": vault_hosts})
        except Exception as exc:
            m = re.search(r"failed to parse inventory source (.+)$", str(exc))
            failed = m.group(1).strip() if m else source
            message = "; ".join(failures) or f"{type(exc).__name__}: {exc}"
            if (
                os.path.isfile(failed)
                and os.access(failed, os.X_OK)
                and not {"script", "ansible.builtin.script"} & set(enabled)
            ):
                message += (
                    " -- it is executable, but the script inventory plugin is not enabled: add "
                    f"ansible.builtin.script to [inventory] enable_plugins in {C.CONFIG_FILE or 'ansible.cfg'}"
                )
            else:
                message += f" (enabled inventory plugins: {', '.join(enabled)})"
            out.append({"source": source, "file": failed, "error": " ".join(message.split())})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
