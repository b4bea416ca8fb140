"""`ddpctl logs -f` keeps rank lines as the bytes it read up to the write; a read cut by its chunk ends a line.

Bytes written as read must show exactly what the decoded, sanitized text showed before: the same prefixes,
control characters made visible the same way, undecodable bytes replaced the same way.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ddpctl.logs.core import LineSplitter, Source, decoded
from ddpctl.logs.files import FileTail
from ddpctl.logs.merge import Merger
from ddpctl.logs.output import PlainSink

LINES = [
    [b"plain ascii", b"tabs\tstay"],
    [b"osc52 \x1b]52;c;cm0gLXJmIH4=\x07", b"fine"],
    [b"progress\r50%", b"nul\x00 del\x7f"],
    [b"c1 csi \xc2\x9b2J", b"bidi \xe2\x80\xaeevil\xe2\x80\xac"],
    [b"\xc3\xbcn\xc3\xafc\xc3\xb6d\xc3\xa9 \xe2\x9c\x93"],
    [b"undecodable \xff\xfe", b"cut \xe2\x82", b""],
]


def shown(raw: bool, node: str, lines: list[bytes], binary: bool) -> tuple[str, str]:
    """What the bytes path (a release through `ordered`) and the text path (`lines`) write, as text."""
    outs = []
    for through_bytes in (True, False):
        buffer = io.BytesIO()
        out: io.TextIOBase = io.TextIOWrapper(buffer, encoding="utf-8", newline="") if binary else io.StringIO()
        sink = PlainSink(out, raw=raw)  # type: ignore[arg-type]
        sources = [Source(0, node, 3), Source(0, node, 1)]
        if through_bytes:
            merger = Merger()
            merger.add_timed([1.0, 3.0], sources[0], [lines[0], lines[-1]], 0.0)
            merger.add(2.0, sources[1], lines)
            merger.release(sink)
        else:
            sink.lines(sources[0], decoded(lines[:1]), 1.0)
            sink.lines(sources[1], decoded(lines), 2.0)
            sink.lines(sources[0], decoded(lines[-1:]), 3.0)
        sink.note("-- end --")
        sink.flush()
        outs.append(buffer.getvalue().decode() if binary else out.getvalue())  # type: ignore[attr-defined]
    return outs[0], outs[1]


@pytest.mark.parametrize("lines", LINES)
@pytest.mark.parametrize("raw", [False, True])
@pytest.mark.parametrize("node", ["node1", "node2\x1b[31m", "nöde"])
@pytest.mark.parametrize("binary", [True, False])
def test_lines_written_as_read_show_what_the_decoded_text_showed(
    lines: list[bytes], raw: bool, node: str, binary: bool
) -> None:
    as_bytes, as_text = shown(raw, node, lines, binary)
    assert as_bytes == as_text
    assert as_bytes.count("\n") == len(lines) + 3  # whole lines, and nothing split one


@pytest.mark.parametrize(
    ("chunks", "raw_lines"),
    [
        ([b"a\nb", b"c\n"], [[b"a"], [b"bc"]]),
        ([b"\xe2\x82", b"\xac\n"], [[], [b"\xe2\x82\xac"]]),
        ([b"x\n\ny\n"], [[b"x", b"", b"y"]]),
    ],
)
def test_splitter_keeps_bytes_and_decodes_them_the_same(chunks: list[bytes], raw_lines: list[list[bytes]]) -> None:
    as_bytes, as_text = LineSplitter(), LineSplitter()
    for chunk, expected in zip(chunks, raw_lines, strict=True):
        got = as_bytes.feed_raw(chunk)
        assert got == expected
        assert decoded(got) == as_text.feed(chunk)


@pytest.mark.parametrize(
    ("data", "chunk", "polls"),
    [
        # A read cut by its chunk ends at the last whole line; the rest comes next time.
        (b"line one\nline two\nline 3\n", 12, [([b"line one"], 9), ([b"line two"], 18), ([b"line 3"], 25)]),
        (b"a\nb\nc\n", 64, [([b"a", b"b", b"c"], 6)]),
        # A line longer than the chunk is read in pieces, as before.
        (b"x" * 30 + b"\n", 20, [([], 20), ([b"x" * 30], 31)]),
    ],
)
def test_a_read_cut_by_its_chunk_ends_with_a_whole_line(
    tmp_path: Path, data: bytes, chunk: int, polls: list[tuple[list[bytes], int]]
) -> None:
    log = tmp_path / "rank-0.log"
    log.write_bytes(data)
    tail = FileTail(log, Source(0, "n", 0))
    for lines, offset in polls:
        timed = tail.poll_raw(chunk)
        assert timed is not None and (timed[1], tail.offset) == (lines, offset)
        assert tail.behind == (offset < len(data))
    assert tail.poll_raw(chunk) is None
    tail.close()
