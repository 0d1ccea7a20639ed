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
        "from ansible_collections.gpufleet.cluster.plugins.module_utils.preload import "
        "preload_jinja_plugins as p; imported = p()",
    )
    # Importing a strategy does not load them; the preload does, when the strategy starts.
    assert not set(seen["before"]) >= _filter_modules()
    assert _filter_modules() <= set(seen["after"])


def test_both_strategies_preload_when_they_start():
    # The strategy's __init__ needs a task queue manager; the preload is its first statement, so a
    # stand-in that fails right after it shows the order.
    call = "try:\n    strategy.StrategyModule(None)\nexcept Exception:\n    pass"
    for name in ("linear", "mitogen_linear"):
        seen = _probe(name, call)
        assert _filter_modules() <= set(seen["after"]), name


def test_preload_skips_what_is_missing():
    from ansible_collections.gpufleet.cluster.plugins.module_utils.preload import preload_jinja_plugins

    assert preload_jinja_plugins(("ansible_collections.gpufleet.cluster.plugins.no_such_package",)) == []
