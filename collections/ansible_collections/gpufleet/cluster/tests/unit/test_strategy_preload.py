"""The strategies import the collection's Jinja plugins in the controller, before workers fork."""

from __future__ import annotations

import json
import os
import subprocess
import sys

COLLECTIONS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
FILTER_DIR = os.path.join(COLLECTIONS, "ansible_collections", "gpufleet", "cluster", "plugins", "filter")
PREFIX = "ansible_collections.gpufleet.cluster.plugins.filter."

# Each probe runs in a fresh interpreter: this test process has imported the filters already.
PROBE = """
import json, sys
sys.path.insert(0, {collections!r})
from ansible_collections.gpufleet.cluster.plugins.strategy import {strategy} as strategy
before = sorted(m for m in sys.modules if m.startswith({prefix!r}))
{call}
after = sorted(m for m in sys.modules if m.startswith({prefix!r}))
print(json.dumps({{"before": before, "after": after}}))
"""


def _probe(strategy: str, call: str) -> dict:
    code = PROBE.format(collections=COLLECTIONS, strategy=strategy, prefix=PREFIX, call=call)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=COLLECTIONS)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _filter_modules() -> set[str]:
    files = {f[:-3] for f in os.listdir(FILTER_DIR) if f.endswith(".py") and f != "__init__.py"}
    assert len(files) > 5
    return {PREFIX + f for f in files}


def test_preload_imports_every_filter_file():
    seen = _probe(
        "linear",
        "from ansible_collections.gpufleet.cluster.plugins.module_utils.common.preload import "
        "preload_jinja_plugins as p; imported = p()",
    )
    # Importing a strategy does not load them; the preload does, when the strategy starts.
    assert not set(seen["before"]) >= _filter_modules()
    assert _filter_modules() <= set(seen["after"])


def test_both_strategies_preload_when_they_start():
    # The strategy's __init__ needs a task queue manager; the preload comes before it is needed, so a
    # stand-in that fails once it is needed shows the order.
    call = "try:\n    strategy.StrategyModule(None)\nexcept Exception:\n    pass"
    for name in ("linear", "mitogen_linear"):
        seen = _probe(name, call)
        assert _filter_modules() <= set(seen["after"]), name


def test_preload_skips_what_is_missing():
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common.preload import preload_jinja_plugins

    assert preload_jinja_plugins(("ansible_collections.gpufleet.cluster.plugins.no_such_package",)) == []


KEEPALIVE_PROBE = """
import json, sys
sys.path.insert(0, {collections!r})
from ansible_collections.gpufleet.cluster.plugins.strategy import mitogen_linear as strategy
import ansible_mitogen.transport_config as tc

class Conn:
    def __init__(self, task_vars):
        self.task_vars = task_vars
    def get_task_var(self, name):
        return self.task_vars.get(name)

class Stub:
    # PlayContextSpec asks the connection for the task's variables, MitogenViaSpec reads host vars.
    def __init__(self, task_vars):
        self._connection = Conn(task_vars)
        self._host_vars = task_vars

def read(task_vars):
    s = Stub(task_vars)
    return [[getattr(cls, n)(s) for n in ("mitogen_ssh_keepalive_interval", "mitogen_ssh_keepalive_count")]
            for cls in (tc.PlayContextSpec, tc.MitogenViaSpec)]

before = read({{}})
try:
    strategy.StrategyModule(None)  # patches, then fails without a task queue manager
except Exception:
    pass
print(json.dumps({{"before": before, "unset": read({{}}), "set": read({{"mitogen_ssh_keepalive_interval": 60,
      "mitogen_ssh_keepalive_count": 2}}), "defaults": strategy.KEEPALIVE_DEFAULTS}}))
"""


def test_mitogen_gives_a_silent_node_up_after_gpufleets_keepalive_unless_the_inventory_says_otherwise():
    """A node that loses power closes no connection: Mitogen's SSH keepalive decides how long every
    host waits at the task. Unset, Mitogen would fall back to 30 s x 10; once the strategy starts,
    the fallback is gpufleet's (about a minute), and an inventory's values still win. Plain ssh
    (ansible.cfg's ssh_args) gives up after the same time."""
    import configparser

    code = KEEPALIVE_PROBE.format(collections=COLLECTIONS)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=COLLECTIONS)
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    interval = seen["defaults"]["mitogen_ssh_keepalive_interval"]
    count = seen["defaults"]["mitogen_ssh_keepalive_count"]
    assert seen["before"] == [[None, None], [None, None]]
    assert seen["unset"] == [[interval, count], [interval, count]]
    assert seen["set"] == [[60, 2], [60, 2]]
    assert 30 <= interval * count <= 90

    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(os.path.join(COLLECTIONS, "..", "ansible.cfg"))
    opts = dict(a.split("=", 1) for a in cfg.get("ssh_connection", "ssh_args").split() if "=" in a)
    assert int(opts["ServerAliveInterval"]) * int(opts["ServerAliveCountMax"]) == interval * count


WORKER_PROBE = """
import json, sys
from ansible.plugins.loader import action_loader, init_plugin_loader
init_plugin_loader([{collections!r}])  # as ansible-playbook does before a strategy starts
from ansible_collections.gpufleet.cluster.plugins.strategy import {strategy} as strategy
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import preload
wanted = list(preload.WORKER_MODULES)
before = [m for m in wanted if m in sys.modules]
try:
    strategy.StrategyModule(None)
except Exception:
    pass
cached = sorted(p.rsplit("/", 1)[-1] for p in action_loader._module_cache if p.endswith(".py"))
print(json.dumps({{"before": before, "after": [m for m in wanted if m in sys.modules], "cached": cached}}))
"""


def test_both_strategies_load_what_every_worker_would_import():
    for name in ("linear", "mitogen_linear"):
        code = WORKER_PROBE.format(collections=COLLECTIONS, strategy=name)
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=COLLECTIONS)
        seen = json.loads(proc.stdout.strip().splitlines()[-1])
        from ansible_collections.gpufleet.cluster.plugins.module_utils.common import preload

        # The result decoder and the action plugins are not imported by loading a strategy...
        assert "ansible.module_utils._internal._json._profiles._module_legacy_m2c" not in seen["before"], name
        # ...but when it starts, before any worker forks: the modules, and the actions in the loader's cache.
        assert seen["after"] == list(preload.WORKER_MODULES), name
        for action in ("normal.py", "command.py", "copy.py", "template.py", "file_content.py"):
            assert action in seen["cached"], (name, seen["cached"])


def test_worker_preload_skips_what_is_missing():
    from ansible_collections.gpufleet.cluster.plugins.module_utils.common.preload import preload_worker_imports

    assert preload_worker_imports(("no_such_module_anywhere",), ("gpufleet.cluster.no_such_action",)) == []
