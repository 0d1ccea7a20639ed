"""The strategy plugin imports the collection's Jinja plugins in the controller, before workers fork."""

from __future__ import annotations

import json
import os
import subprocess
import sys

COLLECTIONS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
FILTER_DIR = os.path.join(COLLECTIONS, "ansible_collections", "gpufleet", "cluster", "plugins", "filter")

PROBE = """
import json, sys
sys.path.insert(0, {collections!r})
from ansible_collections.gpufleet.cluster.plugins.strategy import mitogen_linear
prefix = "ansible_collections.gpufleet.cluster.plugins.filter."
before = sorted(m for m in sys.modules if m.startswith(prefix))
mitogen_linear._preload_jinja_plugins()
after = sorted(m for m in sys.modules if m.startswith(prefix))
print(json.dumps({{"before": before, "after": after}}))
"""


def _probe() -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(collections=COLLECTIONS)],
        capture_output=True,
        text=True,
        check=True,
        cwd=COLLECTIONS,
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_filter_file_is_imported_by_the_preload():
    files = sorted(f[:-3] for f in os.listdir(FILTER_DIR) if f.endswith(".py") and f != "__init__.py")
    assert len(files) > 5
    seen = _probe()
    prefix = "ansible_collections.gpufleet.cluster.plugins.filter."
    # Importing the strategy alone does not load them (the preload does, when the strategy starts).
    assert not set(seen["before"]) >= {prefix + f for f in files}
    assert {prefix + f for f in files} <= set(seen["after"])
