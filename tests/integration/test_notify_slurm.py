"""The run's last notice on a real Slurm job: sent from the batch step, which Slurm ends (and whose cgroup it
kills) as soon as the batch shell exits, so the sender must be done by then."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from clitools import Cli, write_spec

pytestmark = pytest.mark.slurm

# Slow to start on purpose (as a webhook's TLS handshake or a mail host's greeting is): a sender killed with the
# job's cgroup never writes.
RECEIVER = (
    "import json, sys, time; notice = json.load(sys.stdin); time.sleep(1.5);"
    " open(sys.argv[1], 'a').write(json.dumps(notice) + '\\n')"
)


@pytest.mark.parametrize("outcome", ["finish", "failure"])
def test_the_last_notice_of_a_slurm_job_is_delivered(tmp_path: Path, cleanup_jobs, outcome: str) -> None:  # type: ignore[no-untyped-def]
    cli = Cli(tmp_path / "home", cwd=tmp_path)
    (tmp_path / "job.py").write_text(f"import sys\nsys.exit({0 if outcome == 'finish' else 3})\n")
    received = tmp_path / "notices.jsonl"
    spec = write_spec(
        tmp_path / "job.yaml",
        name="notified",
        script="job.py",
        nodes=1,
        nproc_per_node=1,
        time="00:05:00",
        partition="debug",
        requeue={"max_failures": 0},
        notify={"command": [sys.executable, "-c", RECEIVER, str(received)], "on": ["finish", "failure"]},
    )
    done = cli.run("submit", str(spec), "--wait", check=False)
    cleanup_jobs(done.stdout.split("job ", 1)[1].split()[0])
    assert received.exists(), f"no notice arrived\n{done.stdout}{done.stderr}"
    (notice,) = [json.loads(line) for line in received.read_text().splitlines()]
    assert notice["event"] == outcome, notice
