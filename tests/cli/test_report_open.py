"""`ddpctl report --open`: the written file opened where a browser is found, else one line saying so, the path
printed either way. No real browser: the opener (and webbrowser's lookup) are injected, nothing is patched."""

from __future__ import annotations

import argparse
import json
import time
import webbrowser
from pathlib import Path
from typing import Any

import pytest

from ddpctl.cli import build_parser
from ddpctl.cli.report import browser_open, run, show


class Recorder:
    """An opener that keeps what it was asked to open and answers `why` (None: opened)."""

    def __init__(self, why: str | None = None) -> None:
        self.why, self.paths = why, list[Path]()

    def __call__(self, path: Path) -> str | None:
        self.paths.append(path)
        return self.why


class FakeBrowser:
    def __init__(self, started: bool = True) -> None:
        self.started, self.urls = started, list[str]()

    def open(self, url: str) -> bool:
        self.urls.append(url)
        return self.started


def no_browser() -> Any:
    raise webbrowser.Error("could not locate runnable browser")


def test_a_found_browser_gets_the_file_url(tmp_path: Path) -> None:
    browser = FakeBrowser()
    assert browser_open(tmp_path / "report.html", find=lambda: browser) is None
    assert browser.urls == [(tmp_path / "report.html").resolve().as_uri()]


def test_no_browser_or_one_that_does_not_start_is_said_not_raised(tmp_path: Path) -> None:
    assert browser_open(tmp_path / "r.html", find=no_browser) == "no browser found here (set BROWSER to name one)"
    assert browser_open(tmp_path / "r.html", find=lambda: FakeBrowser(False)) == "the browser did not start"


def test_show_says_one_line_with_the_path_only_when_not_opened(capsys: pytest.CaptureFixture[str]) -> None:
    opened = Recorder()
    show(Path("/r/report.html"), opened)
    assert opened.paths == [Path("/r/report.html")] and capsys.readouterr().err == ""
    show(Path("/r/report.html"), Recorder("no browser found here"))
    err = capsys.readouterr().err
    assert err == "ddpctl report: not opened: no browser found here; the report is /r/report.html\n"


def test_report_open_writes_prints_and_opens_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home, run_dir = tmp_path / "home", tmp_path / "run"
    (run_dir / "attempt-0").mkdir(parents=True)
    home.mkdir()
    decided = {"event": "decision", "action": "finish", "exit_code": 0, "reason": "done", "attempt": 0, "t": 1.0}
    (run_dir / "events.jsonl").write_text(json.dumps(decided) + "\n")
    record = {"job_id": "local-7", "name": "shown", "run_dir": str(run_dir), "backend": "local",
              "submitted_at": time.time()}  # fmt: skip
    (home / "registry.jsonl").write_text(json.dumps(record) + "\n")
    monkeypatch.setenv("DDPCTL_HOME", str(home))
    args = build_parser().parse_args(["report", "shown", "--open"])
    assert isinstance(args, argparse.Namespace) and args.open is True
    opened = Recorder("no browser found here")
    assert run(args, opener=opened) == 0
    out, err = capsys.readouterr()
    target = Path(out.strip())
    assert opened.paths == [target] and target.is_file() and "<svg" in target.read_text()
    assert err.strip().endswith(f"not opened: no browser found here; the report is {target}")
    args = build_parser().parse_args(["report", "shown"])
    assert run(args, opener=opened) == 0
    assert len(opened.paths) == 1  # without --open nothing is opened
