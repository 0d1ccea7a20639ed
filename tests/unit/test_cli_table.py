"""The CLI's one text-table renderer (``gpufleet_cli.table.columns``): widths, alignment, gaps."""

from __future__ import annotations

from gpufleet_cli.table import columns


def test_columns_are_as_wide_as_their_widest_cell_and_the_last_is_not_padded():
    lines = columns([("gpu01", "PASS", "ok"), ("gpu100", "FAIL", "HW_PORT_RATE")], ("host", "gate", "codes"))
    assert lines == [
        "host    gate  codes",
        "gpu01   PASS  ok",
        "gpu100  FAIL  HW_PORT_RATE",
    ]


def test_right_aligned_columns_are_padded_even_last():
    lines = columns([("a", 5, 12), ("bbb", 100, 3)], ("h", "n", "m"), right=(1, 2), indent="  ")
    assert lines == ["  h      n   m", "  a      5  12", "  bbb  100   3"]


def test_min_widths_keep_a_fixed_layout_and_a_longer_value_widens_it():
    short = columns([("lab-ctl01", "Up 2 hours")], min_widths=(12,), gap=" ")
    assert short == ["lab-ctl01    Up 2 hours"]
    long = columns([("a-very-long-hostname", "Up"), ("x", "Exited")], min_widths=(12,), gap=" ")
    assert long == ["a-very-long-hostname Up", "x                    Exited"]


def test_one_gap_per_column_boundary():
    lines = columns([("gpu01", 312, 0)], ("host", "ok", "changed"), right=(1, 2), min_widths=(0, 4), gap=("  ", " "))
    assert lines == ["host     ok changed", "gpu01   312       0"]


def test_no_rows_and_no_header_is_no_lines():
    assert columns([]) == []
    assert columns([], ("host", "state")) == ["host  state"]
