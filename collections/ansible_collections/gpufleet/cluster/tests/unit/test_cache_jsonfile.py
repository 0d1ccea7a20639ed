"""gpufleet.cluster.jsonfile: builtin jsonfile's files and answers, each host's facts decoded once.

Each probe runs in a fresh interpreter: Ansible reads its configuration (the cache directory and
timeout from the environment) once, at import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

COLLECTIONS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))

PRELUDE = """
import json, os, sys
sys.path.insert(0, {collections!r})
from ansible._internal._plugins import _cache
from ansible.plugins.loader import cache_loader, init_plugin_loader
init_plugin_loader([{collections!r}])  # what ansible-playbook does first: collections importable

decodes = [0]
_orig = _cache.PluginInterposer._decode
def _counting(self, value):
    decodes[0] += 1
    return _orig(self, value)
_cache.PluginInterposer._decode = _counting

def ours():
    return cache_loader.get("gpufleet.cluster.jsonfile")

def builtin():
    return cache_loader.get("ansible.builtin.jsonfile")

out = {{}}
"""

FACTS = {"ansible_hostname": "gpu01", "gpufleet_hw": {"gpus": [{"index": 0, "name": "H100"}]}, "n": [1, 2.5, None]}


def _probe(body: str, cache_dir, timeout: int = 7200, prefix: str = "") -> dict:
    code = PRELUDE.format(collections=COLLECTIONS) + textwrap.dedent(body) + "\nprint(json.dumps(out))\n"
    cfg = cache_dir.parent / "ansible.cfg"  # none of the project's settings
    cfg.write_text("[defaults]\n")
    env = dict(
        os.environ,
        ANSIBLE_COLLECTIONS_PATH=COLLECTIONS,
        ANSIBLE_CACHE_PLUGIN_CONNECTION=str(cache_dir),
        ANSIBLE_CACHE_PLUGIN_TIMEOUT=str(timeout),
        ANSIBLE_CONFIG=str(cfg),
    )
    if prefix:
        env["ANSIBLE_CACHE_PLUGIN_PREFIX"] = prefix
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=COLLECTIONS)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_reads_decode_once_per_set(tmp_path):
    out = _probe(
        f"""
        c = ours()
        c.set("gpu01", {FACTS!r})
        reads = [c.get("gpu01") for _ in range(50)]
        out["decodes_after_50_reads"] = decodes[0]
        out["same_answer"] = all(r == {FACTS!r} for r in reads)
        c.set("gpu01", dict({FACTS!r}, ansible_hostname="gpu01-new"))
        out["after_set"] = c.get("gpu01")["ansible_hostname"]
        c.get("gpu01")
        out["decodes_after_second_set"] = decodes[0]
        out["wrapped"] = isinstance(c, _cache.PluginInterposer)
        """,
        tmp_path / "facts",
    )
    # The builtin plugin decodes on every read: 50 here.
    assert out["decodes_after_50_reads"] == 1
    assert out["same_answer"] is True
    # A set is never shadowed by the decoded facts of before.
    assert out["after_set"] == "gpu01-new"
    assert out["decodes_after_second_set"] == 2
    # Ansible's loader does not wrap it a second time (that would decode on every read again).
    assert out["wrapped"] is False


def test_same_files_as_builtin_jsonfile(tmp_path):
    # What this plugin writes, builtin jsonfile reads in another run, and the other way round.
    body = f'ours().set("gpu01", {FACTS!r})\nbuiltin().set("gpu02", {{"ansible_hostname": "gpu02"}})'
    _probe(body, tmp_path / "facts")
    assert sorted(os.listdir(tmp_path / "facts")) == ["s1_gpu01", "s1_gpu02"]
    out = _probe(
        """
        out["builtin_reads_ours"] = builtin().get("gpu01")
        out["ours_reads_builtin"] = ours().get("gpu02")
        """,
        tmp_path / "facts",
    )
    assert out["builtin_reads_ours"] == FACTS
    assert out["ours_reads_builtin"] == {"ansible_hostname": "gpu02"}


def test_expired_missing_deleted_and_flushed(tmp_path):
    # With a prefix: builtin jsonfile's keys() and flush() (which this plugin passes on) fail without
    # one in ansible-core 2.19 (len(None)).
    _probe(f'builtin().set("old", {FACTS!r})\nbuiltin().set("gpu01", {FACTS!r})', tmp_path / "facts", prefix="fc_")
    os.utime(tmp_path / "facts" / "fc_s1_old", (1, 1))  # written long before the timeout
    out = _probe(
        """
        c = ours()
        def get(key):
            try:
                return c.get(key)
            except KeyError:
                return "KeyError"
        out["expired"] = get("old")
        out["expired_contains"] = c.contains("old")
        out["missing"] = get("nobody")
        out["keys"] = sorted(c.keys())
        c.get("gpu01")
        c.delete("gpu01")
        out["deleted"] = get("gpu01")
        out["deleted_contains"] = c.contains("gpu01")
        c.set("gpu02", {"a": 1})
        c.get("gpu02")
        c.flush()
        out["flushed"] = get("gpu02")
        """,
        tmp_path / "facts",
        timeout=60,
        prefix="fc_",
    )
    assert out["expired"] == "KeyError"
    assert out["expired_contains"] is False
    assert out["missing"] == "KeyError"
    assert out["keys"] == ["gpu01"]  # not the expired one
    assert out["deleted"] == "KeyError"
    assert out["deleted_contains"] is False
    assert out["flushed"] == "KeyError"
    assert not [f for f in os.listdir(tmp_path / "facts") if f.endswith(("gpu01", "gpu02"))]
