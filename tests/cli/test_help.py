"""Every command's --help: fits an 80-column terminal, hides the internal commands, lists backends one way."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ddpctl.cli import COMMAND_MODULES, build_parser

ROOT = Path(__file__).resolve().parents[2]


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.fixture
def commands(monkeypatch: pytest.MonkeyPatch) -> dict[str, argparse.ArgumentParser]:
    monkeypatch.setenv("COLUMNS", "80")
    return subparsers(build_parser())


def test_every_help_fits_80_columns(commands: dict[str, argparse.ArgumentParser]) -> None:
    wide = {}
    for name, parser in commands.items():
        texts = [parser.format_help()]
        if name == "internal":
            texts += [inner.format_help() for inner in subparsers(parser).values()]
        for text in texts:
            wide.update({f"{name}: {line}": len(line) for line in text.splitlines() if len(line) > 80})
    wide.update({f"(top): {line}": len(line) for line in build_parser().format_help().splitlines() if len(line) > 80})
    assert wide == {}


def test_internal_is_hidden_from_the_top_level_help_but_callable() -> None:
    top = subprocess.run(
        [sys.executable, "-m", "ddpctl", "--help"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    listed = re.findall(r"^    (\w+) ", top, re.MULTILINE)
    shown = [name for name in COMMAND_MODULES if name not in ("internal", "jobs")]  # jobs.py: list and cancel
    assert "internal" not in listed and sorted(listed) == sorted(["list", "cancel", *shown]), top
    inner = subprocess.run(
        [sys.executable, "-m", "ddpctl", "internal", "--help"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert inner.returncode == 0 and "decide" in inner.stdout, inner


def test_backends_are_listed_in_one_order_everywhere(commands: dict[str, argparse.ArgumentParser]) -> None:
    with_backend = {}
    for name, parser in commands.items():
        for action in parser._actions:
            if "--backend" in action.option_strings:
                with_backend[name] = list(action.choices or [])
    assert set(with_backend) >= {"submit", "doctor", "render", "scale"}, with_backend
    assert {tuple(v) for v in with_backend.values()} == {("sbatch", "submitit", "local")}, with_backend


def test_commands_have_descriptions_and_mention_only_options_they_have(
    commands: dict[str, argparse.ArgumentParser],
) -> None:
    for name in ("list", "cancel"):
        assert commands[name].description, name
    for name, parser in commands.items():
        options = {o for a in parser._actions for o in a.option_strings}
        text = parser.format_help()
        for said in re.findall(r"(?<![\w`-])(--[a-z][a-z-]+)(?![\w-])", text):
            if said not in options and name not in ("internal",):
                # Options of other commands are named with that command (`submit --backend local`).
                assert re.search(rf"`[^`]*{re.escape(said)}", text), (name, said)


def test_render_backend(tmp_path: Path) -> None:
    spec = ROOT / "jobs" / "example.yaml"
    run = [sys.executable, "-m", "ddpctl", "render", str(spec)]
    plain = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    sbatch = subprocess.run([*run, "--backend", "sbatch"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert sbatch.stdout == plain and plain.startswith("#!")
    local = subprocess.run([*run, "--backend", "local"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert local.returncode == 2 and local.stdout == ""
    assert local.stderr.startswith("ddpctl: error: render --backend local: that backend submits no batch script"), local


def documented(readme: str, command: str, option: str) -> bool:
    """The option appears in the README: a long one anywhere, a short one on a line with its command."""
    if option.startswith("--"):
        return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", readme) is not None
    return re.search(rf"\b{re.escape(command)}\b[^\n]*(?<![\w-]){re.escape(option)}(?![\w-])", readme) is not None


def test_every_option_of_every_command_is_in_the_readme(commands: dict[str, argparse.ArgumentParser]) -> None:
    # The first hour found six options only --help knew of (logs --poll, list --json, submit --wait, ...).
    readme = (ROOT / "README.md").read_text()
    missing = [
        f"{name} {'/'.join(action.option_strings)}"
        for name, parser in commands.items()
        if name != "internal"
        for action in parser._actions
        if action.option_strings and "--help" not in action.option_strings
        if not any(documented(readme, name, option) for option in action.option_strings)
    ]
    assert missing == []


def test_an_unknown_command_lists_only_the_commands_a_user_types() -> None:
    """Issue 45: argparse's answer listed `internal` and `sweep-results` too."""
    done = subprocess.run(
        [sys.executable, "-m", "ddpctl", "stauts", "x"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2 and done.stdout == ""
    error = done.stderr.splitlines()[-1]
    assert error.startswith("ddpctl: error: unknown command 'stauts' (commands: submit, sweep, status,"), error
    assert error.endswith("; did you mean 'status'?") and "internal" not in error and "sweep-results" not in error
