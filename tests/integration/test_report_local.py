"""`ddpctl report` of a real preempted and requeued local-backend run: the HTML's structure and its data."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
from clitools import EXAMPLE_SCRIPT, REPO, Cli, example_spec, write_spec

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
    counts: dict[str, int] = {}
    for label, points in re.findall(r'data-series="([^"]*)" data-points="(\d+)"', chart.group(0)):
        counts[label] = counts.get(label, 0) + int(points)  # a line cut at a requeue's gap is drawn in pieces
    return counts


@dataclass
class Reported:
    cli: Cli
    job_id: str
    run_dir: Path
    running: Path  # the report written while the job ran
    final: Path  # ... and after its end
    shown: str  # what `ddpctl report NAME` printed


@pytest.fixture(scope="module")
def reported(tmp_path_factory: pytest.TempPathFactory) -> Reported:
    """A real local run preempted once and requeued to completion, reported while running and after its end (one
    run for the module's tests: it takes a minute or two on 2 cores)."""
    tmp_path = tmp_path_factory.mktemp("report")
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    cli = Cli(tmp_path / "home", cwd=REPO, extra_env={"PATH": str(empty)})
    spec = example_spec(tmp_path, "reported", "--sleep-per-step", "0.3", "--epochs", "3")
    job_id, run_dir = cli.submit(spec)
    cli.wait_for(lambda: len(list((run_dir / "attempt-0").glob("series-*.jsonl"))) == 4, timeout=180, what="series")
    cli.wait_for(lambda: (run_dir / "attempt-0" / "series-0.jsonl").read_text().count("\n") >= 3, what="3 points")
    running = Path(cli.run("report", job_id, "-o", str(tmp_path / "running.html")).stdout.strip())
    cli.run("preempt", job_id)
    status = cli.wait_terminal(job_id, timeout=300)
    assert (status["state"], status["restarts"]) == ("COMPLETED", 1)
    with (run_dir / "attempt-1" / "series-3.jsonl").open("a") as series:
        series.write('{"t": 1e300, "step": "<script>x</script>"\n')  # crafted, and cut in the middle
    shown = cli.run("report", "reported").stdout
    return Reported(cli, job_id, run_dir, running, Path(shown.strip()), shown)


def test_report_of_a_preempted_and_requeued_run(reported: Reported) -> None:
    assert "a snapshot of a running job" in reported.running.read_text()
    path, run_dir = reported.final, reported.run_dir
    assert path == run_dir / "report.html" and reported.shown.count("\n") == 1
    html = path.read_text()
    page = parse(path)
    assert not page.find("script") and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert page.find("span", id="state") and "COMPLETED" in html
    attempts = page.find("rect", **{"class": "attempt"})
    assert len(attempts) == 2
    assert "stop → requeue (preemption: requeue 1 of 10)" in html
    step = series_of("step-time", html)
    assert {"local1 step", "local2 step", "local1 busy", "local2 busy"} <= set(step) and min(step.values()) >= 2
    assert set(series_of("throughput", html)) == {"local1", "local2"}
    loss = series_of("value-loss", html)
    assert set(loss) == {"attempt 0", "attempt 1"} and min(loss.values()) >= 2
    assert page.find("line", **{"class": "mark"}), "the resume point is not marked"
    assert len(page.find("rect", **{"class": "busy"})) == 4 and len(page.find("rect", **{"class": "wait"})) == 4
    assert "attempt 1 rank 3: 1 unreadable series line(s)" in html and "<script>x" not in html
    assert "name: reported" in "".join(page.text) and page.find("p", id="code")


@pytest.mark.browser
def test_headless_chromium_draws_the_report(reported: Reported, tmp_path: Path) -> None:
    """The report opened in Debian's headless Chromium: no console error (a blocked fetch, a CSP refusal), the
    charts in the DOM it built, and a screenshot (kept in this test's tmp dir) that has the charts' colours."""
    from PIL import Image

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "headless Chromium is needed: apt-get install chromium"
    url = reported.final.as_uri()
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"]
    dom = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=True)
    assert dom.stdout.count('<svg class="chart"') >= 5 and "<polyline" in dom.stdout
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Refused to" in line]
    assert console == [], console
    shot = tmp_path / "report.png"
    subprocess.run([*base, f"--screenshot={shot}", "--window-size=1100,2600", url], capture_output=True, timeout=120,
                   check=True)  # fmt: skip
    print(f"screenshot: {shot}")
    colours = {colour for _, colour in Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 24) or []}
    assert {(31, 119, 180), (214, 39, 40)} <= colours, "the chart lines were not drawn"


def test_report_of_a_sweep_shows_its_points(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    cli = Cli(tmp_path / "home", cwd=tmp_path, extra_env={"PATH": str(empty)})
    spec = write_spec(
        tmp_path / "swept.yaml", name="swept", script=str(EXAMPLE_SCRIPT), nodes=1, nproc_per_node=1,
        args=["--epochs", "1", "--samples", "256", "--batch-size", "32", "--accum", "1", "--sleep-per-step", "0.4"],
        run_dir=str(tmp_path / "runs"), env={"OMP_NUM_THREADS": "1"}, backend="local",
    )  # fmt: skip
    out = cli.run("sweep", str(spec), "--grid", "env.LR=0.1,0.01", "--max-parallel", "2").stdout
    sweep = out.split("submitted sweep ", 1)[1].split()[1]
    for index in range(2):
        cli.wait_terminal(f"{sweep}_{index}")
    path = Path(cli.run("report", "swept").stdout.strip())
    assert path.name == f"report-sweep-{sweep}.html"
    html = path.read_text()
    page = parse(path)
    assert not page.find("script")
    assert "env.LR=0.1" in html and "env.LR=0.01" in html
    loss = series_of("value-loss", html)
    assert set(loss) == {"env.LR=0.1", "env.LR=0.01"} and min(loss.values()) >= 2
    assert len(page.find("rect", **{"class": "attempt"})) == 2
