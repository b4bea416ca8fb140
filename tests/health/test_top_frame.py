"""`ddpctl top` frames rendered by rich into a fixed 80x24 console: every rank when they fit, a per-node summary
with the flagged ranks when they do not (64 ranks), and no control character from a log line on screen."""

from __future__ import annotations

from rich.console import Console

from ddpctl.cli.top_render import frame
from ddpctl.health.view import rank_rows
from ddpctl.run.registry import JobRecord
from ddpctl.run.state import JobState
from ddpctl.spec import HealthSettings

NOW = 1000.0


def snap(ranks: int, per_node: int, **extra: object) -> dict[str, object]:
    records = {
        r: {
            "step": 50,
            "t": NOW - 1,
            "step_s": 0.2,
            "busy_s": 0.1,
            "window": 20,
            "phase": "train",
            "node": f"n{r // per_node:02d}",
        }
        for r in range(ranks)
    }
    records[13].update(step=41, t=NOW - 120)  # silent for 2 minutes: a stall
    records[min(40, ranks - 1)].update(busy_s=0.9)  # 9x the others: a straggler
    logs = {r: (f"step 50 loss 1.0 rank {r}", NOW - 1) for r in range(ranks)}
    logs[5] = ("\x1b[2J\x1b]0;pwned\x07evil\rline", NOW - 1)
    rows = rank_rows(records, logs, nodes={}, flagged=[], policy=HealthSettings(), now=NOW)
    return {"attempt": 1, "rows": rows, "summary": None, "notes": [], **extra}


def render(snapshot: dict[str, object], width: int = 80, height: int = 24) -> str:
    console = Console(width=width, height=height, record=True, force_terminal=True, color_system=None)
    record = JobRecord("local-7", "big", "/nonexistent", "local", 0.0)
    console.print(frame(record, JobState("RUNNING"), snapshot, console.size))
    return console.export_text()


def test_64_ranks_are_summarised_per_node_and_the_flagged_ranks_listed_in_80x24() -> None:
    text = render(snap(64, 8))
    lines = text.splitlines()
    assert len(lines) <= 24 and max(map(len, lines)) <= 80
    assert "64 ranks on 8 nodes" in text
    assert sum(line.startswith("n0") for line in lines) == 8  # one row per node
    flagged = [line for line in lines if "STALL" in line or "STRAG" in line]
    assert any(line.lstrip().startswith("13 ") and "STALL" in line for line in flagged), text
    assert any(line.lstrip().startswith("40 ") and "STRAGGLER" in line for line in flagged), text


def test_few_ranks_get_a_row_each_with_lag_and_visible_control_characters() -> None:
    text = render(snap(16, 8), width=120, height=40)
    assert "64 ranks" not in text and "summarised" not in text
    row13 = next(line for line in text.splitlines() if line.lstrip().startswith("13 "))
    assert " 9 " in row13 and "120s" in row13 and "STALL" in row13  # 9 steps behind, 120 s silent
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text
    assert "^[[2J" in text  # shown as `ddpctl logs` shows it


def test_the_newest_cause_is_shown_below_the_ranks() -> None:
    causes = [
        "attempt 0 ended by hang: rank 3 on n00 (requeued: node_failure (hang): requeue 1 of 5)",
        "attempt 1 ended by rank-crash: rank 13 on n01: killed by SIGKILL (requeued: node_failure: requeue 2 of 5)",
    ]
    text = render(snap(16, 8, causes=causes), width=160, height=40)
    assert causes[1] in text and "attempt 0 ended" not in text, text


def test_a_rank_before_its_first_step_is_starting_not_stalled() -> None:
    """Issue 45: during a normal start-up (torch import, rendezvous) every rank was flagged STALL."""
    logs = {0: ("", NOW - 60), 1: ("loading data", NOW - 30)}  # quiet logs, no progress record yet
    records = {1: {"phase": "setup", "node": "n00", "t": NOW - 30}}
    rows = rank_rows(records, logs, nodes={0: "n00"}, flagged=[], policy=HealthSettings(), now=NOW)
    assert [(row.rank, row.step, row.stall) for row in rows] == [(0, None, False), (1, None, False)]
    late = rank_rows({0: {"step": 3, "t": NOW - 60}}, logs, nodes={}, flagged=[], policy=HealthSettings(), now=NOW)
    assert late[0].stall  # after a first step, 60 s of silence is a stall
    policy = HealthSettings(startup_s=50)
    rows = rank_rows(records, logs, nodes={0: "n00"}, flagged=[], policy=policy, now=NOW)
    assert [row.stall for row in rows] == [True, False]  # silent past the start-up allowance: a stall after all
