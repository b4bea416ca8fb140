"""`time:` on the local backend is kept as Slurm keeps it (issue 45, item 2): the stop signal `lead_s` before the
limit (classified as the time limit's warning), then the kill at the limit; each attempt's clock starts again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from clitools import Cli, events, write_spec

pytestmark = pytest.mark.torchrun

# A plain script that never listens: it would run 100 s.
SLOW = "import time\nfor i in range(200):\n    print('step', i, flush=True)\n    time.sleep(0.5)\n"


def test_the_warning_comes_lead_s_before_the_limit_and_the_kill_at_it(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(SLOW)
    spec = write_spec(
        tmp_path / "job.yaml",
        name="limited",
        script="slow.py",
        nodes=1,
        nproc_per_node=1,
        run_dir=str(tmp_path / "runs"),
        backend="local",
        time="0:12",  # M:S
        requeue={"lead_s": 5, "max_timeouts": 1},
    )
    cli = Cli(tmp_path / "state", cwd=tmp_path)
    began = time.monotonic()
    job_id, run_dir = cli.submit(spec)
    status = cli.wait_terminal(job_id, timeout=120)
    took = time.monotonic() - began
    assert status["state"] == "BUDGET_SPENT", status
    seen = events(run_dir)
    starts = {e["attempt"]: e["t"] for e in seen if e["event"] == "attempt-start"}
    signals = [e for e in seen if e["event"] == "signal"]
    assert [(e["attempt"], e["kind"]) for e in signals] == [(0, "timeout"), (1, "timeout")], seen
    for signal in signals:  # 12 - 5 = 7 s into its own attempt (the supervisor polls every 0.1 s)
        assert 6.5 <= signal["t"] - starts[signal["attempt"]] <= 9.0, (signal, starts)
        assert signal["time_left_s"] in (4, 5, 6)
    decisions = [(e["attempt"], e["action"], e["kind"]) for e in seen if e["event"] == "decision"]
    assert decisions == [(0, "requeue", "timeout"), (1, "finish", "timeout")], seen
    assert 24 <= took < 60, took  # two attempts of 12 s each, not the script's 100 s
    assert "time limit 0:12 in 5 s: sending the stop signal" in (run_dir / "slurm.out").read_text()
