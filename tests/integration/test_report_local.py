"""`ddpctl report` of a real preempted and requeued local-backend run: the HTML's structure and its data."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from clitools import REPO, Cli, example_spec

pytestmark = pytest.mark.torchrun


class Elements(HTMLParser):
    """Every start tag with its attributes, and the page's text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def find(self, tag: str, **attrs: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag and all(a.get(k) == v for k, v in attrs.items())]


def parse(path: Path) -> Elements:
    parsed = Elements()
    parsed.feed(path.read_text())
    return parsed


def series_of(svg: str, html: str) -> dict[str, int]:
    """The polylines of chart `svg` and their point counts."""
    chart = re.search(rf'<svg class="chart" data-chart="{svg}".*?</svg>', html, re.S)
    assert chart, f"chart {svg} not drawn"
    return {m[0]: int(m[1]) for m in re.findall(r'data-series="([^"]*)" data-points="(\d+)"', chart.group(0))}


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    return Cli(tmp_path / "home", cwd=REPO, extra_env={"PATH": str(empty)})


def test_report_of_a_preempted_and_requeued_run(cli: Cli, tmp_path: Path) -> None:
    spec = example_spec(tmp_path, "reported", "--sleep-per-step", "0.3", "--epochs", "3")
    job_id, run_dir = cli.submit(spec)
    cli.wait_for(lambda: len(list((run_dir / "attempt-0").glob("series-*.jsonl"))) == 4, timeout=180, what="series")
    cli.wait_for(lambda: (run_dir / "attempt-0" / "series-0.jsonl").read_text().count("\n") >= 3, what="3 points")
    running = Path(cli.run("report", job_id, "-o", str(tmp_path / "running.html")).stdout.strip())
    assert "a snapshot of a running job" in running.read_text()
    cli.run("preempt", job_id)
    status = cli.wait_terminal(job_id, timeout=300)
    assert (status["state"], status["restarts"]) == ("COMPLETED", 1)
    (run_dir / "attempt-1" / "series-3.jsonl").open("a").write('{"t": 1e300, "step": "<script>x</script>"\n')

    shown = cli.run("report", "reported")
    path = Path(shown.stdout.strip())
    assert path == run_dir / "report.html" and shown.stdout.count("\n") == 1
    html = path.read_text()
    page = parse(path)
    assert not page.find("script") and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert page.find("span", id="state") and "COMPLETED" in html
    attempts = page.find("rect", **{"class": "attempt"})
    assert len(attempts) == 2
    assert "preemption" in html or "stop" in html
    step = series_of("step-time", html)
    assert {"local1 step", "local2 step", "local1 busy", "local2 busy"} <= set(step) and min(step.values()) >= 2
    assert set(series_of("throughput", html)) == {"local1", "local2"}
    loss = series_of("value-loss", html)
    assert set(loss) == {"attempt 0", "attempt 1"} and min(loss.values()) >= 2
    assert page.find("line", **{"class": "mark"}), "the resume point is not marked"
    assert len(page.find("rect", **{"class": "busy"})) == 4 and len(page.find("rect", **{"class": "wait"})) == 4
    assert "attempt 1 rank 3: 1 unreadable series line(s)" in html and "<script>x" not in html
    assert "name: reported" in "".join(page.text) and page.find("p", id="code")
