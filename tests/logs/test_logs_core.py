"""Pure core of `ddpctl logs`: tables of literal inputs."""

from __future__ import annotations

import json

import pytest

from ddpctl.errors import LogsError
from ddpctl.logs.core import (
    MAX_PENDING,
    LineFilter,
    LineSplitter,
    Source,
    check_nodes,
    check_ranks,
    compile_grep,
    parse_attempt,
    parse_nodes,
    parse_rank_spec,
    render_json,
    render_plain,
    select_attempts,
)
from ddpctl.logs.notify import Backoff


@pytest.mark.parametrize(
    ("spec", "ranks"),
    [
        ("0", {0}),
        ("0,3-5", {0, 3, 4, 5}),
        (" 1 , 2 ", {1, 2}),
        ("7-7", {7}),
        ("2,2,1-2", {1, 2}),
        ("0-1023", set(range(1024))),
    ],
)
def test_rank_spec(spec: str, ranks: set[int]) -> None:
    assert parse_rank_spec(spec) == ranks


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "bad item ''"),
        ("a", "bad item 'a'"),
        ("1,,2", "bad item ''"),
        ("-1", "bad item '-1'"),
        ("3-", "bad item '3-'"),
        ("1-a", "bad item '1-a'"),
        ("5-3", "runs backwards; allowed: LOW-HIGH, e.g. 3-5"),
        ("0-99999999", "too large"),
    ],
)
def test_bad_rank_spec(spec: str, message: str) -> None:
    with pytest.raises(LogsError, match=r"^--rank") as err:
        parse_rank_spec(spec)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("ranks", "world", "ok"),
    [
        (frozenset({0, 3}), 4, True),
        (frozenset({4}), 4, False),
        (frozenset({100}), 0, True),  # world not known yet: nothing to check against
        (None, 4, True),
    ],
)
def test_check_ranks(ranks: frozenset[int] | None, world: int, ok: bool) -> None:
    if ok:
        check_ranks(ranks, world)
    else:
        with pytest.raises(LogsError, match=r"rank 4 is outside the job's world size 4; allowed: 0-3"):
            check_ranks(ranks, world)


def test_nodes_parse_and_check() -> None:
    assert parse_nodes("node1, node2") == {"node1", "node2"}
    with pytest.raises(LogsError, match="--node ','"):
        parse_nodes(",")
    check_nodes(frozenset({"node2"}), ["node1", "node2"])
    check_nodes(frozenset({"anything"}), [])  # no node info yet
    with pytest.raises(LogsError, match=r"no node 'node3' .*did you mean 'node2'.*allowed: node1, node2"):
        check_nodes(frozenset({"node3"}), ["node1", "node2"])


@pytest.mark.parametrize(
    ("spec", "choice", "available", "selected"),
    [
        (None, None, [0, 1, 2], [2]),
        ("all", "all", [0, 1, 2], [0, 1, 2]),
        ("1", 1, [0, 1, 2], [1]),
        (None, None, [], []),
        ("all", "all", [], []),
    ],
)
def test_attempts(spec: str | None, choice: object, available: list[int], selected: list[int]) -> None:
    assert parse_attempt(spec) == choice
    assert select_attempts(parse_attempt(spec), available) == selected


def test_bad_attempts() -> None:
    with pytest.raises(LogsError, match=r"--attempt 'x': not a number; allowed: .* or 'all'"):
        parse_attempt("x")
    with pytest.raises(LogsError, match=r"--attempt 5: this job has no such attempt; allowed: 0, 1 or 'all'"):
        select_attempts(5, [0, 1])


def test_grep() -> None:
    assert compile_grep(r"loss=\d").search("step 3 loss=0.5")
    with pytest.raises(LogsError, match=r"^--grep '\(': not a valid regular expression"):
        compile_grep("(")


@pytest.mark.parametrize(
    ("flt", "rank", "node", "wanted"),
    [
        (LineFilter(), 3, None, True),
        (LineFilter(ranks=frozenset({1, 3})), 3, "n1", True),
        (LineFilter(ranks=frozenset({1, 3})), 2, "n1", False),
        (LineFilter(nodes=frozenset({"n2"})), 2, "n2", True),
        (LineFilter(nodes=frozenset({"n2"})), 2, "n1", False),
        (LineFilter(nodes=frozenset({"n2"})), 2, None, False),  # node not known yet: wait for node info
    ],
)
def test_filter_wants(flt: LineFilter, rank: int, node: str | None, wanted: bool) -> None:
    assert flt.wants(rank, node) is wanted


def test_filter_grep_selects_lines() -> None:
    flt = LineFilter(grep=compile_grep("^step"))
    assert flt.select(["step 1", "x step", "step 2"]) == ["step 1", "step 2"]
    assert LineFilter().select(["a"]) == ["a"]


@pytest.mark.parametrize(
    ("chunks", "lines", "partial"),
    [
        ([b"a\nb\n"], ["a", "b"], ""),
        ([b"a\nb"], ["a"], "b"),
        ([b"par", b"tial\n"], ["partial"], ""),
        ([b"\n\n"], ["", ""], ""),
        ([b"caf\xc3", b"\xa9\n"], ["café"], ""),  # a UTF-8 character cut between two reads
        ([b"bad \xff\xfe bytes\n"], ["bad \ufffd\ufffd bytes"], ""),
        ([b"crlf\r\n"], ["crlf\r"], ""),
        ([b"x" * 10, b"y" * 5], [], "x" * 10 + "y" * 5),
    ],
)
def test_splitter(chunks: list[bytes], lines: list[str], partial: str) -> None:
    splitter = LineSplitter()
    got = [line for chunk in chunks for line in splitter.feed(chunk)]
    assert got == lines
    assert splitter.has_partial is bool(partial)
    assert splitter.flush() == ([partial] if partial else [])
    assert not splitter.has_partial


def test_splitter_bounds_a_line_without_newline() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b"x" * MAX_PENDING) == []
    assert splitter.feed(b"y") == ["x" * MAX_PENDING + "y"]
    assert not splitter.has_partial


def test_render() -> None:
    src = Source(1, "node2", 3)
    assert src.prefix == "[a1 node2 r3] "
    assert Source(0, None, 5).prefix == "[a0 ? r5] "
    assert render_plain(src.prefix, ["a", "", "b"]) == "[a1 node2 r3] a\n[a1 node2 r3] \n[a1 node2 r3] b\n"
    assert render_plain(src.prefix, []) == ""
    rows = [json.loads(line) for line in render_json(src, ["x", 'q"\\']).splitlines()]
    assert rows == [
        {"attempt": 1, "node": "node2", "rank": 3, "text": "x"},
        {"attempt": 1, "node": "node2", "rank": 3, "text": 'q"\\'},
    ]


def test_backoff() -> None:
    backoff = Backoff(0.05, 0.5)
    assert [backoff.next(False) for _ in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]
    assert backoff.next(True) == 0.05
    assert backoff.next(False) == 0.1
