"""`ddpctl scale` results: speedup and efficiency maths, the table, scaling.json and scaling.png."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpctl.cli.scale import sizes
from ddpctl.health.scaling import SizeResult, table, with_speedups, write_json, write_png


def test_speedup_is_relative_to_the_first_size_and_efficiency_divides_by_the_growth_in_ranks() -> None:
    results = with_speedups(
        [
            SizeResult(1, 4, "j1", "CANCELLED", 100.0),
            SizeResult(2, 8, "j2", "CANCELLED", 180.0),
            SizeResult(4, 16, "j4", "FAILED", None),
        ]
    )
    assert [(r.speedup, r.efficiency) for r in results] == [(1.0, 1.0), (1.8, 0.9), (None, None)]
    text = table(results)
    assert text.splitlines()[2].split()[:5] == ["2", "8", "180.0", "1.80x", "90%"]
    assert "n/a" in text.splitlines()[3] and "(FAILED)" in text.splitlines()[3]


def test_files(tmp_path: Path) -> None:
    results = with_speedups([SizeResult(1, 1, "j1", "COMPLETED", 50.0), SizeResult(2, 2, "j2", "COMPLETED", 90.0)])
    write_json(tmp_path / "scaling.json", results, {"name": "x"})
    data = json.loads((tmp_path / "scaling.json").read_text())
    assert data["name"] == "x" and [s["efficiency"] for s in data["sizes"]] == [1.0, 0.9]
    pytest.importorskip("matplotlib")
    assert write_png(tmp_path / "scaling.png", results, "x") is None
    assert (tmp_path / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scaling.json", "scaling.png"]


@pytest.mark.parametrize("text", ["", "0,1", "1,1", "a", "1,,2"])
def test_bad_node_lists_are_refused(text: str) -> None:
    with pytest.raises(Exception, match="expected distinct node counts"):
        sizes(text)
