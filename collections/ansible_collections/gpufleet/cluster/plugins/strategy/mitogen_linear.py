# gpufleet.cluster.mitogen_linear: Ansible's linear strategy run through Mitogen when it is installed
# (requirements.txt pins it), plain linear otherwise. ansible.cfg selects it for every gpufleet run.
#
# Mitogen keeps one Python interpreter per host over the SSH connection and sends modules to it,
# instead of a fresh ssh exec + module upload + interpreter start per task. On the lab (2 cores,
# three hosts), a no-op re-run of site.yml's install stages went from 570 s to 231 s with the same
# 0 changed (README, Benchmarks). Task order, results, check mode and diffs are linear's.
# Opt out for one run with ANSIBLE_STRATEGY=linear (the strategy is not a variable: -e cannot set it),
# e.g. to rule Mitogen out while debugging a connection problem.
from __future__ import annotations

DOCUMENTATION = """
name: mitogen_linear
short_description: Ansible's linear strategy over Mitogen's connection (plain linear without Mitogen)
description:
  - Runs plays exactly as C(ansible.builtin.linear), with Mitogen's persistent per-host interpreter when the
    C(mitogen) package is importable; falls back to C(ansible.builtin.linear) with a warning when it is not.
author: gpufleet
"""

try:
    import ansible_mitogen.loaders
    import ansible_mitogen.strategy

    _Base = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)

    class StrategyModule(ansible_mitogen.strategy.StrategyMixin, _Base):
        """Mitogen's linear strategy."""

except ImportError:  # pragma: no cover - depends on what is installed
    from ansible.plugins.strategy.linear import StrategyModule as _Linear
    from ansible.utils.display import Display

    class StrategyModule(_Linear):
        """Plain linear: Mitogen is not installed."""

        def __init__(self, tqm):
            Display().warning("gpufleet.cluster.mitogen_linear: mitogen is not installed, using the linear strategy")
            super().__init__(tqm)
