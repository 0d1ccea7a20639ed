# gpufleet.cluster.jsonfile: ansible.builtin.jsonfile's fact cache (the same files, the same options),
# read once per run instead of once per task and host.
#
# ansible-core 2.19 wraps every persistent cache plugin in an interposer that JSON-encodes each
# host's facts into one string and decodes that string again on every read. The variable manager
# reads a host's facts for every task it queues for that host (and for every play's gathering
# check), so each host's facts would be decoded once per task of the run, on the controller's main
# thread, where every other host waits on it (figures: docs/benchmarks.md).
# This plugin keeps builtin jsonfile, interposer included, as its store, and keeps the decoded
# facts of each host in memory until they are set, deleted or flushed; a set is read back through
# the store once, so a read returns exactly what the builtin plugin would have returned.
# The files stay ansible.builtin.jsonfile's: `fact_caching = jsonfile` reads what this wrote, and
# `gpufleet lab up|down` and `--flush-cache` clear them as before.
from __future__ import annotations

DOCUMENTATION = """
name: jsonfile
short_description: ansible.builtin.jsonfile's fact cache, each host's facts decoded once per run
description:
  - Stores facts exactly as C(ansible.builtin.jsonfile) does (it is the store), configured by the same settings
    (C(fact_caching_connection), C(fact_caching_prefix), C(fact_caching_timeout)).
  - Keeps each host's decoded facts in memory until they are set, deleted or flushed, instead of decoding the
    stored JSON again on every read (once per task and host).
author: gpufleet
"""

from ansible.plugins.cache import BaseCacheModule
from ansible.plugins.loader import cache_loader

STORE = "ansible.builtin.jsonfile"


class CacheModule(BaseCacheModule):
    """Fact cache: builtin jsonfile as the store, decoded facts memoized per host."""

    # Not persistent to Ansible's cache loader: it must not wrap this plugin in its JSON interposer;
    # the store it opens (builtin jsonfile) is wrapped, and persists.
    _persistent = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._store = cache_loader.get(STORE, *args, **kwargs)
        self._decoded: dict[str, dict[str, object]] = {}

    def get(self, key: str) -> dict[str, object]:
        try:
            return self._decoded[key]
        except KeyError:
            value = self._store.get(key)  # KeyError: not cached or expired, as the store says
            self._decoded[key] = value
            return value

    def set(self, key: str, value: dict[str, object]) -> None:
        self._decoded.pop(key, None)
        self._store.set(key, value)

    def keys(self):
        return self._store.keys()

    def contains(self, key: object) -> bool:
        return key in self._decoded or self._store.contains(key)

    def delete(self, key: str) -> None:
        self._decoded.pop(key, None)
        self._store.delete(key)

    def flush(self) -> None:
        self._decoded.clear()
        self._store.flush()
