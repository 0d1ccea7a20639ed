"""mitogen_linear has each Mitogen mux prepare, in a thread of its own, the modules a host's first task asks
for: the mux's module responder holds them (with the modules they import) before any host asks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

COLLECTIONS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))

pytest.importorskip("ansible_mitogen")

# In a fresh interpreter: Mitogen's module-level state (the responder set-up function) is patched.
PROBE = """
import json, sys, threading
sys.path.insert(0, {collections!r})
import mitogen.master
import ansible_mitogen.process
from ansible_collections.gpufleet.cluster.plugins.strategy import mitogen_linear as strategy

strategy._prewarm_in_each_mux()
strategy._prewarm_in_each_mux()  # twice, as every play's strategy does: one warm-up thread
broker = mitogen.master.Broker(install_watcher=False)
router = mitogen.master.Router(broker=broker)
try:
    responder = router.responder
    ansible_mitogen.process._setup_responder(responder)
    warm = [t for t in threading.enumerate() if t.name == "gpufleet-prewarm"]
    for t in warm:
        t.join(60)
    cached = sorted(responder._cache)
    related = list(responder._cache["ansible.module_utils.basic"][4])
finally:
    broker.shutdown()
    broker.join()
print(json.dumps({{"threads": len(warm), "cached": cached, "related": related,
                   "roots": list(strategy.PREWARM_MODULES), "whitelist": sorted(responder.whitelist)}}))
"""


def probe() -> dict:
    code = PROBE.format(collections=COLLECTIONS)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=COLLECTIONS)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_each_mux_holds_the_first_tasks_modules_and_what_they_import_before_a_host_asks():
    seen = probe()
    assert seen["threads"] == 1
    cached = set(seen["cached"])
    assert set(seen["roots"]) <= cached
    # ansible.module_utils.basic comes with what it imports (the mux's own list of them), all ready.
    assert "ansible.module_utils.common.text.converters" in seen["related"]
    assert set(seen["related"]) <= cached
    # Mitogen's own set-up still ran: the responder serves ansible and ansible_mitogen only.
    assert {"ansible", "ansible_mitogen"} <= set(seen["whitelist"])
