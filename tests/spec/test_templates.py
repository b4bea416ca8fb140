"""Shipped templates are found next to the package in a checkout, not in some other installed copy."""

from __future__ import annotations

from pathlib import Path

from ddpctl.spec.templates import template_path, templates_dir

REPO = Path(__file__).resolve().parents[2]


def test_checkout_templates_are_this_checkouts() -> None:
    assert templates_dir() == REPO / "templates"
    assert template_path("ddp") == REPO / "templates" / "ddp.sbatch.j2"
