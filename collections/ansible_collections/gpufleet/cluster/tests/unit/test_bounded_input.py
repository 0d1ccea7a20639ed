"""Bounded reading (module_utils/common/bounded.py) and the direct inventory reader on hostile input:
every shape here once hung, exhausted memory or ended in a traceback. Each test names its shape."""

from __future__ import annotations

import math
import os
import sys
import time

import pytest
import yaml
from ansible_collections.gpufleet.cluster.plugins.module_utils.acceptance import nccl_tests
from ansible_collections.gpufleet.cluster.plugins.module_utils.common import bounded
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory import generator, reader
from ansible_collections.gpufleet.cluster.plugins.module_utils.inventory.reader import (
    InventoryError,
    expand_hostname_range,
    load_inventory,
    load_yaml_text,
)

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(9)
)


def write(path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def fast(fn, *args, budget: float = 2.0):
    """Call fn and assert it returned or raised within budget seconds; its result or exception."""
    t0 = time.monotonic()
    try:
        result = fn(*args)
    except Exception as exc:  # the test inspects it
        result = exc
    assert time.monotonic() - t0 < budget, f"{fn.__name__} took {time.monotonic() - t0:.1f} s"
    return result


# --- files that are not regular files ---------------------------------------------------------------


def test_fifo_is_refused_by_name_without_blocking(tmp_path):
    fifo = tmp_path / "hosts.yml"
    os.mkfifo(fifo)
    exc = fast(bounded.read_regular_file, str(fifo), "an inventory")
    assert isinstance(exc, bounded.InputError)
    assert str(exc) == f"{fifo}: is a FIFO (named pipe), expected an inventory (a regular file)"


def test_link_to_dev_zero_is_refused(tmp_path):
    link = tmp_path / "all.yml"
    link.symlink_to("/dev/zero")
    exc = fast(bounded.read_regular_file, str(link))
    assert isinstance(exc, bounded.InputError) and "is a character device" in str(exc)


def test_directory_where_a_file_is_expected(tmp_path):
    exc = fast(bounded.read_regular_file, str(tmp_path), "a brief")
    assert isinstance(exc, bounded.InputError) and "is a directory, expected a brief" in str(exc)


def test_size_limit(tmp_path):
    path = write(tmp_path / "big.yml", "x" * 101)
    with pytest.raises(bounded.InputError, match=r"101 bytes, expected a file of at most 100 bytes"):
        bounded.read_regular_file(path, max_bytes=100)
    assert bounded.read_regular_file(path, max_bytes=101) == b"x" * 101


def test_missing_file_names_what_was_expected(tmp_path):
    with pytest.raises(bounded.InputError, match=r"no such file, expected a brief"):
        bounded.read_regular_file(str(tmp_path / "nope"), "a brief")


# --- YAML -------------------------------------------------------------------------------------------


def test_alias_bomb_fails_fast_without_building_it():
    exc = fast(load_yaml_text, ALIAS_BOMB, "brief.yml", budget=1.0)
    assert isinstance(exc, InventoryError)
    assert "brief.yml: its aliases expand to" in str(exc) and "alias bomb" in str(exc)
    assert len(str(exc)) < 300


def test_aliases_and_merge_keys_in_ordinary_use_still_load():
    text = "base: &b {x: 1, y: 2}\nhosts:\n  a: *b\n  b: {<<: *b, y: 3}\n"
    assert load_yaml_text(text, "f") == {
        "base": {"x": 1, "y": 2},
        "hosts": {"a": {"x": 1, "y": 2}, "b": {"x": 1, "y": 3}},
    }


def test_recursive_alias_is_refused():
    with pytest.raises(InventoryError, match=r"f:1: an alias refers to a node that contains it"):
        load_yaml_text("a: &a [1, *a]\n", "f")


def test_nesting_depth_is_bounded():
    text = "a: " + "[" * 300 + "]" * 300 + "\n"
    with pytest.raises(InventoryError, match=r"expected at most 200 levels of nesting"):
        load_yaml_text(text, "f")


@pytest.mark.parametrize(
    ("text", "line", "first"),
    [
        ("cluster: {name: a}\nacceptance:\n  single_node_busbw_gbps: 400\n  single_node_busbw_gbps: 100\n", 4, 3),
        ("a: 1\nb: 2\na: 3\n", 3, 1),
        ("m:\n  <<: {x: 1}\n  x: 2\n  x: 3\n", 4, 3),
    ],
)
def test_duplicate_key_is_an_error_naming_both_lines(text, line, first):
    with pytest.raises(InventoryError) as exc:
        load_yaml_text(text, "brief.yml")
    assert str(exc.value).startswith(f"brief.yml:{line}:")
    assert f"(first on line {first})" in str(exc.value) and "duplicate key" in str(exc.value)


def test_merge_key_overridden_by_an_explicit_key_is_not_a_duplicate():
    assert load_yaml_text("d: &d {x: 1}\nm:\n  <<: *d\n  x: 2\n", "f")["m"] == {"x": 2}


@pytest.mark.parametrize("literal", ["1" * 5000, "0x" + "f" * 5000, "-" + "9" * 4301])
def test_integer_past_pythons_digit_limit_is_an_error_naming_the_line(literal):
    exc = fast(load_yaml_text, f"cluster:\n  size: {literal}\n", "brief.yml")
    assert isinstance(exc, InventoryError)
    assert str(exc).startswith("brief.yml:2:") and "at most 4300 digits" in str(exc)


def test_integers_within_the_limit_load():
    assert load_yaml_text("a: 0x10\nb: 1_000\nc: " + "9" * 100 + "\n", "f") == {"a": 16, "b": 1000, "c": int("9" * 100)}


def test_short_repr_never_builds_the_whole_value():
    huge = [[list(range(1000))] * 1000] * 1000  # a billion items if printed
    t0 = time.monotonic()
    text = bounded.short_repr(huge)
    assert time.monotonic() - t0 < 0.1 and len(text) <= 60
    assert "digits" in bounded.short_repr(10**5000)


# --- JSON -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"a": ' + "1" * 5000 + "}", "at most 4300 digits"),
        ("[" * 100000 + "]" * 100000, "nested too deep"),
        ('{"a": 1,}', "r.json:1:9: not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8 text"),
    ],
)
def test_json_errors_name_the_file(text, needle):
    with pytest.raises(bounded.InputError, match=needle):
        bounded.load_json_bytes(text if isinstance(text, bytes) else text.encode(), "r.json")


# --- the inventory reader ---------------------------------------------------------------------------


def test_nested_host_ranges_are_capped_in_total():
    exc = fast(expand_hostname_range, "n[0:999999]x[0:999999]", budget=0.5)
    assert isinstance(exc, ValueError) and "stands for more than 1000000 hosts" in str(exc)


def test_host_ranges_are_capped_across_the_inventory(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "MAX_HOSTS", 100)
    path = write(tmp_path / "hosts.yml", "all:\n  hosts:\n    a[0:59]:\n    b[0:59]:\n")
    with pytest.raises(InventoryError, match=r"expected at most 100 hosts from ranges in the whole inventory"):
        load_inventory(path)


def test_range_bounds_are_ascii_digits():
    assert expand_hostname_range("gpu[08:10]") == ["gpu08", "gpu09", "gpu10"]
    assert expand_hostname_range("g[a:c]") == ["ga", "gb", "gc"]
    for bad in ("gpu[0:²]", "gpu[0:" + "9" * 5000 + "]", "gpu[0:3:0]"):
        with pytest.raises(ValueError, match="bad range"):
            expand_hostname_range(bad)


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "1" * 5000, "'x'", "[1]"])
def test_group_priority_that_is_no_integer(tmp_path, value):
    path = write(
        tmp_path / "hosts.yml", f"all:\n  children:\n    g:\n      vars:\n        ansible_group_priority: {value}\n"
    )
    exc = fast(load_inventory, path)
    assert isinstance(exc, InventoryError), exc
    assert "ansible_group_priority" in str(exc) or "4300 digits" in str(exc)


def test_group_priority_integer_still_orders_groups(tmp_path):
    path = write(
        tmp_path / "hosts.yml",
        "all:\n  children:\n    a:\n      hosts: {h: }\n      vars: {v: a, ansible_group_priority: 5}\n"
        "    b:\n      hosts: {h: }\n      vars: {v: b}\n",
    )
    assert load_inventory(path).hostvars["h"]["v"] == "a"


def test_a_chain_of_1500_groups(tmp_path):
    lines = ["all:", "  children:"]
    for i in range(1500):
        lines += [f"    g{i}:", "      children:", f"        g{i + 1}:"]
    lines += ["    g1500:", "      hosts:", "        h1:", "      vars: {deep: true}"]
    path = write(tmp_path / "hosts.yml", "\n".join(lines) + "\n")
    inv = fast(load_inventory, path, budget=10.0)
    assert not isinstance(inv, Exception), inv
    assert inv.groups["g0"] == ["h1"] and inv.groups["g1500"] == ["h1"] and inv.hostvars["h1"]["deep"] is True


def test_group_depth_order_is_the_longest_path(tmp_path):
    # b is below a and below all: its depth is 2, so its vars win over c's (depth 1) whatever the names.
    path = write(
        tmp_path / "hosts.yml",
        "all:\n  children:\n    a:\n      children:\n        b:\n          hosts: {h: }\n          vars: {v: b}\n"
        "    b:\n    c:\n      hosts: {h: }\n      vars: {v: c}\n",
    )
    assert load_inventory(path).hostvars["h"]["v"] == "b"


def test_group_vars_all_linked_to_dev_zero(tmp_path):
    path = write(tmp_path / "hosts.yml", "all:\n  hosts: {h: }\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").symlink_to("/dev/zero")
    exc = fast(load_inventory, path)
    assert isinstance(exc, InventoryError)
    assert (
        str(exc) == f"{tmp_path}/group_vars/all.yml: is a character device, expected a variables file (a regular file)"
    )


def test_group_vars_fifo(tmp_path):
    path = write(tmp_path / "hosts.yml", "all:\n  hosts: {h: }\n")
    (tmp_path / "group_vars" / "all").mkdir(parents=True)
    os.mkfifo(tmp_path / "group_vars" / "all" / "main.yml")
    exc = fast(load_inventory, path)
    assert isinstance(exc, InventoryError) and "is a FIFO (named pipe)" in str(exc)


def test_dangling_group_vars_link(tmp_path):
    path = write(tmp_path / "hosts.yml", "all:\n  hosts: {h: }\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "all.yml").symlink_to(tmp_path / "gone.yml")
    with pytest.raises(InventoryError, match=r"group_vars/all.yml: a link to nothing"):
        load_inventory(path)


def _deny(monkeypatch, denied: str):
    """os.listdir / os.open / os.stat raise PermissionError for ``denied`` (tests run as root)."""
    real_listdir, real_open, real_stat = os.listdir, os.open, os.stat

    def check(path):
        if os.path.abspath(os.fspath(path)) == denied:
            raise PermissionError(13, "Permission denied", os.fspath(path))

    def listdir(path="."):
        check(path)
        return real_listdir(path)

    def open_(path, *a, **kw):
        check(path)
        return real_open(path, *a, **kw)

    monkeypatch.setattr(os, "listdir", listdir)
    monkeypatch.setattr(os, "open", open_)
    return real_stat


@pytest.mark.parametrize("what", ["group_vars", "group_vars/all.yml", "host_vars", "host_vars/h.yml"])
def test_unreadable_vars_file_or_directory_is_an_error_naming_it(tmp_path, monkeypatch, what):
    path = write(tmp_path / "hosts.yml", "all:\n  hosts: {h: }\n")
    write(tmp_path / "group_vars" / "all.yml", "a: 1\n")
    write(tmp_path / "host_vars" / "h.yml", "b: 2\n")
    _deny(monkeypatch, str(tmp_path / what))
    with pytest.raises(InventoryError) as exc:
        load_inventory(path)
    assert str(exc.value).startswith(str(tmp_path / what)) and "Permission denied" in str(exc.value)


def _as_nobody(fn, *args):
    """Run fn(*args) in a forked child under uid/gid 65534; (ok, text) from the child."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(r)
            os.setgid(65534)
            os.setuid(65534)
            try:
                text = "ok " + repr(fn(*args))
            except Exception as exc:
                text = f"{type(exc).__name__} {exc}"
            os.write(w, text.encode()[:4000])
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        text = fh.read().decode()
    os.waitpid(pid, 0)
    return text


@pytest.mark.skipif(not hasattr(os, "fork") or os.geteuid() != 0, reason="needs root to drop to another uid")
def test_unreadable_group_vars_directory_for_a_real_other_user(tmp_path):
    import tempfile

    base = tempfile.mkdtemp(prefix="gpufleet-perm-")
    try:
        os.chmod(base, 0o755)
        with open(os.path.join(base, "hosts.yml"), "w") as fh:
            fh.write("all:\n  hosts: {h: }\n")
        os.chmod(os.path.join(base, "hosts.yml"), 0o644)
        gv = os.path.join(base, "group_vars")
        os.mkdir(gv)
        with open(os.path.join(gv, "all.yml"), "w") as fh:
            fh.write("a: 1\n")
        os.chmod(gv, 0o000)  # neither listed nor searched: Ansible would skip it silently
        text = _as_nobody(lambda p: load_inventory(p).hostvars, os.path.join(base, "hosts.yml"))
        assert text.startswith("InventoryError ") and gv in text and "Permission denied" in text, text
    finally:
        os.chmod(os.path.join(base, "group_vars"), 0o755)
        import shutil

        shutil.rmtree(base)


# --- nccl-tests JSON (the -J file) ------------------------------------------------------------------


def _doc(results, **extra) -> str:
    import json

    return json.dumps({"results": results, **extra})


@pytest.mark.parametrize(
    ("size", "needle"),
    [
        (math.nan, "found NaN"),
        (math.inf, "found Infinity"),
        (-math.inf, "found -Infinity"),
        (12.5, "found 12.5"),
        (-8, "found -8"),
        (int("9" * 200), "found 9999"),
    ],
)
def test_nccl_json_size_that_is_no_byte_count_is_skipped_with_a_warning(size, needle):
    runs, warnings = nccl_tests.parse(_doc([{"size": size}, {"size": 8, "type": "float"}]), "r.json")
    assert [r["size"] for r in runs[0]["rows"]] == [8]
    assert any("results[0].size: expected a byte count" in w and needle in w for w in warnings), warnings


def test_nccl_json_5000_digit_size():
    text = '{"results": [{"size": ' + "9" * 5000 + "}]}"
    runs, warnings = fast(nccl_tests.parse, text, "r.json")
    assert runs == [] and warnings


def test_nccl_json_size_written_superscript_two():
    runs, warnings = nccl_tests.parse('{"results": [{"size": "²"}]}', "r.json")
    assert runs == [] and "results[0] is not a result record" in warnings[0]


@pytest.mark.parametrize("errors", ["boom", {"rank": 0, "msg": "boom"}, 7, [1, "two"]])
def test_nccl_json_errors_of_any_shape(errors):
    _runs, warnings = nccl_tests.parse(_doc([{"size": 8}], errors=errors), "r.json")
    reported = [w for w in warnings if "nccl-tests reported" in w]
    assert len(reported) == (2 if isinstance(errors, list) else 1)


def test_nccl_json_nested_too_deep():
    runs, warnings = fast(nccl_tests.parse, '{"a":' + "[" * 50000 + "]" * 50000 + "}", "r.json")
    assert runs == [] and "nested too deep" in warnings[0]


@pytest.mark.parametrize("count", [math.nan, math.inf, "x", 1.5])
def test_nccl_json_out_of_bounds_count_that_is_no_count(count):
    runs, _w = nccl_tests.parse(_doc([{"size": 8}], out_of_bounds={"count": count}), "r.json")
    assert runs[0]["out_of_bounds"] is None


@pytest.mark.parametrize("token", ["²", "9" * 5000, "٣"])
def test_nccl_text_size_token_that_is_no_ascii_count_is_no_row(token):
    assert nccl_tests.parse_row(f"  {token}  2 float sum -1 1 1 1 0 1 1 1 0") is None


# --- inventory generate's sheet ----------------------------------------------------------------------


@pytest.mark.parametrize("index", ["²", "9" * 5000, "٣"])
def test_sheet_index_that_is_no_ascii_integer(index):
    assert not generator.is_index(index)
    with pytest.raises(ValueError, match="expected GROUP=N"):
        generator.parse_bases([f"g={index}"])


def test_natural_key_of_long_and_odd_digit_runs():
    names = ["gpu10", "gpu2", "gpu" + "9" * 5000, "gpu²", "gpu٣"]
    assert sorted(names, key=generator.natural_key)[:2] == ["gpu2", "gpu10"]


def test_bounded_loader_keeps_the_base_loaders_tags():
    loader = bounded.bounded_loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    assert bounded.load_yaml_bytes(b"a: !!str 1\nb: 2020-01-01\n", "f", loader)["a"] == "1"


@pytest.mark.parametrize(("token", "wrong"), [("1e999", sys.maxsize), ("N/A", None), ("3", 3)])
def test_nccl_text_wrong_count_that_overflows_is_many_not_unchecked(token, wrong):
    row = nccl_tests.parse_row(f"  8  2 float sum -1 1 1 1 {token} 1 1 1 0")
    assert row["oop_wrong"] == wrong


def test_nccl_json_infinite_wrong_count_is_many_not_unchecked():
    runs, _w = nccl_tests.parse('{"results": [{"size": 8, "out_of_place": {"nwrong": Infinity}}]}', "r.json")
    assert runs[0]["rows"][0]["oop_wrong"] == sys.maxsize


# --- shapes the fuzz test found ---------------------------------------------------------------------


@pytest.mark.parametrize("code", [math.inf, -math.inf, math.nan, "x", None])
def test_nccl_version_code_that_is_no_integer(code):
    assert nccl_tests.nccl_version_from_code(code) is None
    (run,), _w = nccl_tests.parse(_doc([{"size": 8}], nccl_version=code), "r.json")
    assert run["nccl_version"] is None


def test_nccl_text_out_of_bounds_of_5000_digits_is_many():
    text = (
        "# nThread 1 nGpus 8 minBytes 8 maxBytes 8\n#  size count type redop root time algbw busbw #wrong\n"
        "  8  2 float sum -1 1 1 1 0 1 1 1 0\n# Out of bounds values : " + "9" * 5000 + " FAILED\n"
    )
    runs, _w = nccl_tests.parse(text, "r.log")
    assert runs[0]["out_of_bounds"] == sys.maxsize


@pytest.mark.parametrize("mac", ["10.20.4.101", "1.2", "0x" + "f" * 40])
def test_sheet_mac_that_netaddr_cannot_print_is_a_problem(mac):
    rows, problems = generator.parse_sheet(f"hostname,group,mgmt_mac\ngpu01,g,{mac}\n")
    assert not problems
    found = generator._check_rows(rows, ["g"])
    assert [p.column for p in found] == ["mgmt_mac"], found


@pytest.mark.parametrize("rank", ["9" * 5000, "999999999999"])
def test_nccl_text_rank_past_any_cluster_is_no_rank(rank):
    text = (
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 8\n"
        f"#  Rank {rank} Group  0 Pid   9001 on  gpu01 device  0 [0000:19:00] NVIDIA A100-SXM4-80GB\n"
        "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
        "  8  2 float sum -1 1 1 1 0 1 1 1 0\n"
    )
    (run,), _w = fast(nccl_tests.parse, text, "r.log")
    assert run["rank_hosts"] == []


@pytest.mark.parametrize("rank", [10**12, -1, True, 2.0])
def test_nccl_json_rank_past_any_cluster_is_no_rank(rank):
    doc = _doc([{"size": 8}], devices=[{"rank": rank, "hostname": "gpu01"}])
    (run,), _w = fast(nccl_tests.parse, doc, "r.json")
    assert run["rank_hosts"] == []
