"""Shell completion, driven through argcomplete's own protocol as bash's hook does: COMP_LINE/COMP_POINT and
_ARGCOMPLETE in the environment, completions written to fd 8 (here: to stdout, `8>&1`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ddpctl.run.registry import JobRecord, Registry

ROOT = Path(__file__).resolve().parents[2]


def complete(line: str, home: Path) -> list[str]:
    env = {
        **os.environ,
        "COMP_LINE": line,
        "COMP_POINT": str(len(line)),
        "_ARGCOMPLETE": "1",
        "_ARGCOMPLETE_IFS": "\n",
        "DDPCTL_HOME": str(home),
    }
    done = subprocess.run(
        ["bash", "-c", 'exec "$0" -m ddpctl 8>&1 9>/dev/null', sys.executable],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return sorted(done.stdout.split("\n")) if done.stdout else []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("ddpctl sub", ["submit "]),  # one match: the shell moves on to the next word
        ("ddpctl st", ["status "]),
        ("ddpctl submit --dr", ["--dry-run "]),
        ("ddpctl submit --backend ", ["local", "sbatch", "submitit"]),
        ("ddpctl submit jobs/example.yaml --set nod", ["nodes="]),  # no space after "=": the value comes next
        (
            "ddpctl submit jobs/example.yaml --set requeue.max_",
            ["requeue.max_failures=", "requeue.max_preemptions=", "requeue.max_timeouts="],
        ),
        ("ddpctl render jobs/example.yaml --set backend=s", ["backend=sbatch", "backend=submitit"]),
        (
            "ddpctl submit jobs/example.yaml --set requeue.signal=U",
            ["requeue.signal=URG", "requeue.signal=USR1", "requeue.signal=USR2"],
        ),
        ("ddpctl doctor jobs/example.yaml --set nccl.ib_disable=", ["nccl.ib_disable=false", "nccl.ib_disable=true"]),
    ],
)
def test_commands_options_and_spec_keys(line: str, expected: list[str], tmp_path: Path) -> None:
    assert complete(line, tmp_path) == expected


def test_every_spec_key_is_offered(tmp_path: Path) -> None:
    from ddpctl.spec.overrides import spec_keys

    offered = complete("ddpctl submit x.yaml --set ", tmp_path)
    assert offered == sorted([f"{key}=" for key in spec_keys()] + ["env.=", "sbatch.="])
    assert {"name=", "checkpoint.keep=", "nccl.socket_ifname=", "requeue.lead_s="} <= set(offered)


def test_job_names_and_ids_come_from_the_registry(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    for job_id, name in (("101", "train-a"), ("102", "train-b"), ("local-3", "eval")):
        registry.add(JobRecord(job_id, name, str(tmp_path / job_id), "local", float(job_id[-1])))
    assert complete("ddpctl logs -f train", tmp_path) == ["train-a", "train-b"]
    assert complete("ddpctl cancel 10", tmp_path) == ["101", "102"]
    assert complete("ddpctl preempt ev", tmp_path) == ["eval "]
    assert complete("ddpctl status lo", tmp_path) == ["local-3 "]
