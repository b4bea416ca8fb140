"""The README's screenshots of `ddpctl report`: a requeued run and a sweep, made the same way every time.

In a fresh temporary directory that plays the home directory (HOME, so the reports write run dirs as `~/runs/...`,
and nothing of the machine that made them shows), with this checkout's ddpctl on the local backend (no Slurm):

1. the example job (jobs/example, copied to ~/example; 2 nodes x 2 ranks on CPU, 48 steps) runs, is preempted
   once with `ddpctl preempt` when its loss curve has 15 points, requeues and resumes to the end;
2. a three-point sweep of it (`--grid env.LR=0.3,0.1,0.01`, one rank each) runs to the end;
3. `ddpctl report` writes both pages; each is checked for this machine's paths, user and host name (any found
   fails the script), opened in headless Chromium at a fixed window width, cropped below its last drawn row (the
   run's page a few lines into its spec, which goes on for a hundred lines) and saved as a 256-colour PNG.

    python benchmarks/make_report_screenshots.py [--out benchmarks/screenshots]

It took 6 minutes on 2 shared cores. Chromium (Debian: apt-get install chromium) and Pillow are needed.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WIDTH = 1100
TALL = 4000  # the window's height; the picture is cropped below the page's last drawn row
PREEMPT_AT = 15  # series points (about one a step) before the preemption: a curve on both sides of the resume
SPEC_BOX = (246, 246, 246)  # the spec's <pre> background (htmlreport.STYLE), found at the left margin
SPEC_SHOWN = 200  # pixels of the spec kept in the picture
SPEC = """\
name: example
script: train.py
args: [--epochs, "3", --samples, "4096", --ckpt-every, "4", --sleep-per-step, "0.3"]
nodes: 2
nproc_per_node: 2
backend: local
run_dir: ../runs
env: {OMP_NUM_THREADS: "1"}
requeue: {max_preemptions: 10}
"""
SWEEP = """\
name: lr-sweep
script: train.py
args: [--epochs, "2", --samples, "512", --batch-size, "32", --accum, "1", --sleep-per-step, "0.2"]
nodes: 1
nproc_per_node: 1
backend: local
run_dir: ../runs
env: {OMP_NUM_THREADS: "1"}
"""


class Home:
    """The temporary home: `ddpctl` run there with this checkout's package, its registry inside it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = root / "example"
        self.env = {**os.environ, "HOME": str(root), "DDPCTL_HOME": str(root / ".ddpctl"), "PYTHONPATH": str(REPO)}

    def ddpctl(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "ddpctl", *args], cwd=self.project, env=self.env, capture_output=True,
            text=True, timeout=300, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise SystemExit(f"ddpctl {' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-500:]}")
        return done.stdout

    def status(self, job: str) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.ddpctl("status", job, "--json"))
        return result

    def wait(self, job: str, timeout: float = 400) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status(job)
            if status["state"] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
                return status
            time.sleep(2.0)
        raise SystemExit(f"job {job} did not end in {timeout:.0f} s: {status['state']}")


def requeued_run(home: Home) -> Path:
    """The example job preempted once, once its loss curve has PREEMPT_AT points, and resumed to the end."""
    (home.project / "example.yaml").write_text(SPEC)
    out = home.ddpctl("submit", "example.yaml")
    job = out.split("job ", 1)[1].split()[0]
    run_dir = Path(out.split("run dir:", 1)[1].split()[0])
    series = run_dir / "attempt-0" / "series-0.jsonl"
    deadline = time.monotonic() + 300
    while not (series.exists() and series.read_text().count("\n") >= PREEMPT_AT):
        if time.monotonic() > deadline:
            raise SystemExit(f"no series points after 300 s: {home.status(job)['state']}")
        time.sleep(1.0)
    home.ddpctl("preempt", job)
    status = home.wait(job)
    if (status["state"], status["restarts"]) != ("COMPLETED", 1):
        raise SystemExit(f"expected COMPLETED after one requeue, got {status['state']}, {status['restarts']}")
    return Path(home.ddpctl("report", job).strip())


def sweep(home: Home) -> Path:
    (home.project / "sweep.yaml").write_text(SWEEP)
    out = home.ddpctl("sweep", "sweep.yaml", "--grid", "env.LR=0.3,0.1,0.01", "--max-parallel", "3")
    sweep_id = out.split("submitted sweep ", 1)[1].split()[1]
    for index in range(3):
        home.wait(f"{sweep_id}_{index}")
    return Path(home.ddpctl("report", "lr-sweep").strip())


def leaks(html: str, home: Path) -> list[str]:
    """This machine's own names in a page: the temporary home, the checkout, the user, the host."""
    names = {str(home), str(REPO), str(Path.cwd()), socket.gethostname(), getpass.getuser(), tempfile.gettempdir()}
    return sorted(name for name in names if len(name) > 2 and name in html)


def screenshot(page: Path, png: Path, scratch: Path) -> None:
    """Headless Chromium's picture of `page`, cropped below its last non-white row, as a 256-colour PNG."""
    from PIL import Image, ImageChops

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        raise SystemExit("headless Chromium is needed: apt-get install chromium")
    raw = scratch / f"{png.stem}-raw.png"
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={scratch}",
         f"--window-size={WIDTH},{TALL}", f"--screenshot={raw}", page.as_uri()],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    image = Image.open(raw).convert("RGB")
    drawn = ImageChops.difference(image, Image.new("RGB", image.size, (255, 255, 255))).getbbox()
    if drawn is None:
        raise SystemExit(f"{page.name}: Chromium drew an empty page")
    bottom = min(TALL, drawn[3] + 24)
    boxed = [image.getpixel((30, y)) == SPEC_BOX for y in range(bottom)]
    spec = next((y for y in range(bottom - 10) if all(boxed[y : y + 10])), None)
    image = image.crop((0, 0, WIDTH, bottom if spec is None else min(bottom, spec + SPEC_SHOWN)))
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(png, optimize=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "screenshots")
    parser.add_argument("--keep", action="store_true", help="keep the temporary home (its path is printed)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ddpctl-report-"))
    home = Home(root)
    shutil.copytree(REPO / "jobs" / "example", home.project, ignore=shutil.ignore_patterns("__pycache__"))
    try:
        pages = {"report-requeued-run.png": requeued_run(home), "report-sweep.png": sweep(home)}
        args.out.mkdir(parents=True, exist_ok=True)
        for name, page in pages.items():
            found = leaks(page.read_text(), root)
            if found:
                raise SystemExit(f"{page.name} shows this machine's {', '.join(found)}: not fit for the README")
            screenshot(page, args.out / name, root)
            print(f"{args.out / name}: {(args.out / name).stat().st_size // 1024} KB")
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
