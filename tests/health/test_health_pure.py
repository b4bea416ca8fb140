"""Pure health decisions with literal tables: hang verdicts, stragglers, stack dumps, status figures."""

from __future__ import annotations

import pytest

from ddpctl.health.hang import check_hang
from ddpctl.health.rates import duration, steady_samples_per_s, summarize
from ddpctl.health.report import describe_hang, progress_line, text_lines
from ddpctl.health.stacks import Frame, RankState, culprits, main_frames, node_findings, parse_dump, where
from ddpctl.health.straggler import find_stragglers
from ddpctl.run.history import Hung
from ddpctl.run.history import parse_event as history_parse
from ddpctl.spec import HealthSettings

NOW = 10_000.0


def rec(step: int | None, t: float | None = None, **extra: object) -> dict[str, object]:
    return {"step": step, "t": t, "started": 9_000.0, "phase": "train", **extra}


@pytest.mark.parametrize(
    ("policy", "records", "hung", "why"),
    [
        # explicit timeout: idle 30 s > 20 s
        (HealthSettings(hang_timeout_s=20), {0: rec(5, NOW - 30), 1: rec(5, NOW - 31)}, True, "hang_timeout_s"),
        # the newest progress of any rank counts: rank 1 moved 5 s ago
        (HealthSettings(hang_timeout_s=20), {0: rec(5, NOW - 30), 1: rec(6, NOW - 5)}, False, ""),
        # 0 turns it off
        (HealthSettings(hang_timeout_s=0), {0: rec(5, NOW - 3000)}, False, ""),
        # derived: the default floor 300 s dominates 10 x 1 s steps; a 150 s evaluation nobody declared is no hang
        (HealthSettings(), {0: rec(5, NOW - 150, step_s=0.1), 1: rec(5, NOW - 150, step_s=0.1)}, False, ""),
        (HealthSettings(), {0: rec(5, NOW - 310, step_s=1.0)}, True, "derived"),
        # derived: 10 x 40 s steps = 400 s beats the floor
        (HealthSettings(), {0: rec(5, NOW - 350, step_s=40.0)}, False, ""),
        # a declared pause adds its own allowance, else health.pause_s; the others waiting need not declare it
        (
            HealthSettings(hang_floor_s=6),
            {0: rec(5, NOW - 10, step_s=0.1, phase="eval", pause={"name": "eval"}), 1: rec(5, NOW - 10, step_s=0.1)},
            False,
            "",
        ),
        (
            HealthSettings(hang_floor_s=6, pause_s=3),
            {0: rec(5, NOW - 10, step_s=0.1, phase="eval", pause={"name": "eval"})},
            True,
            "declared pause (eval)",
        ),
        (
            HealthSettings(hang_floor_s=6, pause_s=3),
            {0: rec(5, NOW - 10, step_s=0.1, phase="eval", pause={"name": "eval", "allowance_s": 20})},
            False,
            "",
        ),
        # the same evaluation undeclared: a hang after the floor
        (
            HealthSettings(hang_floor_s=6),
            {0: rec(5, NOW - 10, step_s=0.1), 1: rec(5, NOW - 10, step_s=0.1)},
            True,
            "derived",
        ),
        # the end of a declared pause counts as progress
        (HealthSettings(hang_floor_s=6), {0: rec(5, NOW - 10, step_s=0.1, resumed=NOW - 2)}, False, ""),
        # a stale pause field in the train phase grants nothing; NaN times are no progress
        (
            HealthSettings(hang_floor_s=6),
            {0: rec(5, NOW - 10, pause={"name": "x"}), 1: rec(6, float("nan"))},
            True,
            "derived",
        ),
        # a checkpoint save adds checkpoint_s
        (HealthSettings(hang_timeout_s=20), {0: rec(5, NOW - 30, phase="checkpoint")}, False, ""),
        (
            HealthSettings(hang_timeout_s=20, checkpoint_s=5),
            {0: rec(5, NOW - 30, phase="checkpoint")},
            True,
            "checkpoint_s",
        ),
        # before the first step: startup_s from the heartbeat's start (1000 s ago)
        (HealthSettings(hang_timeout_s=20, startup_s=900), {0: rec(None)}, True, "startup_s"),
        (HealthSettings(hang_timeout_s=20, startup_s=1200), {0: rec(None)}, False, ""),
        # no records: judged only with an explicit timeout, from the attempt's start (5000 s ago)
        (HealthSettings(), {}, False, ""),
        (HealthSettings(hang_timeout_s=20), {}, True, "no rank reported"),
        # a finished rank: the job is ending
        (HealthSettings(hang_timeout_s=20), {0: rec(9, NOW - 60, phase="done"), 1: rec(8, NOW - 60)}, False, ""),
    ],
)
def test_hang_verdicts(policy: HealthSettings, records: dict[int, dict[str, object]], hung: bool, why: str) -> None:
    verdict = check_hang(NOW, NOW - 5000, records, policy)
    assert (verdict is not None) == hung
    if verdict is not None:
        assert why in verdict.why


def busy(value: float, window: int = 20, phase: str = "train") -> dict[str, object]:
    return {"busy_s": value, "window": window, "phase": phase, "node": "n1"}


@pytest.mark.parametrize(
    ("records", "factor", "expected"),
    [
        ({0: busy(0.1), 1: busy(0.1), 2: busy(0.5), 3: busy(0.11)}, 2.0, [2]),
        ({0: busy(0.1), 1: busy(0.1), 2: busy(0.15), 3: busy(0.11)}, 2.0, []),  # 1.5x: below k
        ({0: busy(0.1), 1: busy(0.1), 2: busy(0.5, window=5), 3: busy(0.1)}, 2.0, []),  # window not full
        ({0: busy(0.1), 1: busy(0.1), 2: busy(0.5)}, 0.0, []),  # 0: off
        ({0: busy(0.001), 1: busy(0.001), 2: busy(0.005)}, 2.0, []),  # 5x, but 4 ms: jitter
        ({0: busy(0.1), 1: busy(0.5, phase="checkpoint")}, 2.0, []),  # saving is not straggling
        ({0: busy(0.5)}, 2.0, []),  # alone: nobody to compare with
    ],
)
def test_stragglers(records: dict[int, dict[str, object]], factor: float, expected: list[int]) -> None:
    assert [s.rank for s in find_stragglers(records, factor, 20)] == expected


DUMP = """[example] step 5/16
[ddpctl.health] hang: no rank progressed for 21.0 s (allowed 20 s); stacks of all threads follow
Thread 0x00007f0000000002 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 331 in wait
  File "/repo/ddpctl/runtime/stopflag.py", line 80 in _watch

Current thread 0x00007f0000000001 (most recent call first):
  File "/job/train.py", line 150 in inject_delays
  File "/job/train.py", line 160 in after_step
  File "<frozen runpy>", line 88 in _run_code
"""


def test_parse_dump_finds_the_main_thread_innermost_frame() -> None:
    threads = parse_dump('Thread 0x1 (most recent call first):\n  File "old.py", line 1 in f\n\n' + DUMP)
    assert sorted(threads) == [0x7F0000000001, 0x7F0000000002], "the dump before the mark was read"
    assert threads[0x7F0000000001][0] == Frame("/job/train.py", 150, "inject_delays")
    assert where(main_frames(threads, 0x7F0000000001)) == "/job/train.py:150 in inject_delays"
    assert where(main_frames(threads, None)) == "/job/train.py:150 in inject_delays"  # deepest stack
    assert where(main_frames({}, None)) == "no stack dumped"


def test_culprits_are_the_lowest_step_outside_torch() -> None:
    torch_wait = (Frame("/x/site-packages/torch/nn/parallel/distributed.py", 1, "forward"),)
    sleeping = (Frame("/job/train.py", 150, "inject_delays"),)
    states = [
        RankState(0, "a", 6, torch_wait),
        RankState(1, "a", 5, torch_wait),
        RankState(2, "b", 5, sleeping),
        RankState(3, "b", 5, torch_wait),
    ]
    assert [s.rank for s in culprits(states)] == [2]
    all_waiting = [RankState(0, "a", 5, torch_wait), RankState(1, "a", 5, torch_wait)]
    assert [s.rank for s in culprits(all_waiting)] == [0, 1]
    assert [s.rank for s in culprits([RankState(0, "a", 4, torch_wait), RankState(1, "a", 5, sleeping)])] == [0]


def test_a_node_that_went_silent_is_named_first_not_a_waiting_rank_on_the_healthy_node() -> None:
    """Node b froze (SIGSTOP, cut off): its ranks' heartbeats stopped writing and nothing could be dumped there;
    the healthy node's ranks, blocked in torch at a lower recorded step, only wait for it."""
    torch_wait = (Frame("/x/site-packages/torch/distributed/distributed_c10d.py", 1, "all_reduce"),)
    states = [
        RankState(0, "a", 11, torch_wait),
        RankState(1, "a", 11, torch_wait),
        RankState(2, "b", 12, (), silent_s=40.0),
        RankState(3, "b", 12, (), silent_s=41.5),
    ]
    assert [s.rank for s in culprits(states)] == [2, 3]
    found = node_findings(states)
    assert found == [{"node": "b", "silent": [2, 3], "silent_s": 41.5, "undumped": [2, 3]}]
    event = {
        "event": "hang",
        "attempt": 0,
        "idle_s": 50,
        "timeout_s": 30,
        "culprits": [{"rank": 2, "node": "b", "step": 12, "where": "no stack dumped"}],
        "nodes": found,
    }
    hung = history_parse(event)
    assert isinstance(hung, Hung) and describe_hang(hung).endswith(
        "; node b: rank(s) 2, 3 silent for 41.5 s (no heartbeat write: the process or the node stopped answering)"
        " and no stack dumped from rank(s) 2, 3"
    )


def test_health_lines_escape_control_characters_from_the_run_dir() -> None:
    """A rank that sets DDPCTL_NODE to ESC/BEL sequences must not reach the terminal raw through status."""
    node = "n1\x1b]0;owned\x07\x1b[2J"
    report = {
        "stragglers": [{"event": "straggler", "attempt": 0, "rank": 1, "node": node, "busy_s": 1, "factor": 3}],
        "hangs": [
            {
                "event": "hang",
                "attempt": 0,
                "culprits": [{"rank": 1, "node": node, "where": "x\x07"}],
                "nodes": [{"node": node, "undumped": [1]}],
            }
        ],
        "oom": [{"event": "oom", "attempt": 0, "node": node, "kills": 1}],
        "record_notes": ["skipped attempt-0/progress-1.json: step is '\x1b[31m'"],
    }
    text = "\n".join(text_lines(report))
    assert "\x1b" not in text and "\x07" not in text, text
    assert "straggler in attempt 0: rank 1 on n1^[]0;owned^G^[[2J busy" in text, text
    assert len(text.splitlines()) == 4 and "on n1^[]0;owned^G^[[2J: the kernel's OOM killer" in text, text
    assert "rank 1 on n1^[]0;owned^G^[[2J at step None: x^G" in text and "node n1^[]0;owned^G" in text, text


def history(*points: tuple[float, int, int]) -> dict[str, object]:
    return {"history": [list(p) for p in points]}


def test_summary_figures() -> None:
    records = {
        0: {
            "step": 40,
            "total_steps": 100,
            "t": NOW - 2,
            **history((NOW - 60, 10, 100), (NOW - 22, 20, 200), (NOW - 2, 40, 400)),
        },
        1: {"step": 39, "total_steps": 100, "t": NOW - 3, **history((NOW - 23, 19, 190), (NOW - 3, 39, 390))},
    }
    summary = summarize(records, NOW)
    assert (summary.step, summary.total_steps, summary.last_progress_s) == (40, 100, 2)
    # The 30 s up to now, from the last point before it: rank 0 did 30 steps in 60 s.
    assert summary.steps_per_s == pytest.approx(0.5)
    assert summary.samples_per_s == pytest.approx(5.0 + 200 / 23)  # rank 1: its first point, 23 s ago
    assert summary.eta_s == pytest.approx(120.0)
    stalled = summarize({0: records[0]}, NOW + 100)  # nothing new for 102 s: no rate, no ETA
    assert (stalled.stalled, stalled.steps_per_s, stalled.eta_s, stalled.last_progress_s) == (True, None, None, 102)


def test_no_rate_or_eta_from_a_window_without_progress() -> None:
    """Blocked ranks (0.1 s steps, silent for 25 s) with one step left in the 30 s window: the old summary said
    0.03 steps/s and an ETA; there is no rate while nothing moves, and the text says how long."""
    rank = {
        "step": 41,
        "total_steps": 80,
        "t": NOW - 25,
        "step_s": 0.1,
        **history((NOW - 31, 40, 400), (NOW - 25, 41, 410)),
    }
    summary = summarize({0: rank, 1: rank}, NOW)
    assert (summary.steps_per_s, summary.samples_per_s, summary.eta_s, summary.stalled) == (None, None, None, True)
    line = progress_line({"ranks": 2, **summary.as_json()})
    assert line == "  step 41 of 80 (2 ranks reporting): no progress for 0m25s (no rate or ETA while stalled)"
    # Still moving (last progress 2 s ago with 1 s steps): rates as before.
    moving = {**rank, "t": NOW - 2, "step_s": 1.0, **history((NOW - 31, 40, 400), (NOW - 2, 69, 690))}
    assert summarize({0: moving}, NOW).steps_per_s == pytest.approx(29 / 31)


def test_duration_of_nan_or_infinite_seconds_is_unknown() -> None:
    assert (duration(float("nan")), duration(float("inf")), duration(61.0)) == ("?", "?", "1m01s")


def test_steady_rate_excludes_warm_up() -> None:
    # Warm-up: steps 1..5 took 50 s; after it, 10 samples/s per rank.
    rank = history((0, 1, 10), (50, 5, 50), (51, 6, 60), (61, 16, 160))
    assert steady_samples_per_s({0: rank, 1: rank}, warmup_steps=5) == pytest.approx(20.0)
    assert steady_samples_per_s({0: rank}, warmup_steps=15) is None  # one point left: no rate
