"""Shell completion, driven through argcomplete's own protocol as bash's hook does: COMP_LINE/COMP_POINT and
_ARGCOMPLETE in the environment, completions written to fd 8 (here: to stdout, `8>&1`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
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
            [
                "requeue.max_failures=",
                "requeue.max_node_failures=",
                "requeue.max_preemptions=",
                "requeue.max_stalled_attempts=",
                "requeue.max_timeouts=",
            ],
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


def test_hidden_commands_are_not_offered_and_sweep_results_is(tmp_path: Path) -> None:
    """Issue 45: `internal` and `sweep-results` were offered; `sweep res<TAB>` completed nothing."""
    everything = complete("ddpctl ", tmp_path)
    assert "submit" in everything and "status" in everything
    assert not {"internal", "sweep-results"} & {word.strip() for word in everything}, everything
    assert complete("ddpctl sweep res", tmp_path) == ["results "]
    assert "jobs/" in complete("ddpctl sweep jo", tmp_path)  # the spec file, as before


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


def test_job_refs_are_bounded_newest_first_and_old_ones_reachable_by_prefix(tmp_path: Path) -> None:
    from ddpctl.cli.completion import MAX_REFS

    lines = [JobRecord(str(1000 + n), f"sweep-{n}", "/r", "sbatch", float(n)) for n in range(2000)]
    (tmp_path / "registry.jsonl").write_text("".join(json.dumps(asdict(r), sort_keys=True) + "\n" for r in lines))
    offered = [ref for ref in complete("ddpctl status ", tmp_path) if not ref.startswith("-")]  # (its options too)
    assert len(offered) == MAX_REFS and "sweep-1999" in offered and "2999" in offered  # the newest
    assert "sweep-0" not in offered
    assert complete("ddpctl status sweep-0", tmp_path) == ["sweep-0 "]  # an old one, by its prefix
    assert complete("ddpctl status 1000", tmp_path) == ["1000 "]
