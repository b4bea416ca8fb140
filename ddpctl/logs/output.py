"""Where merged log lines go: plain text, coloured text (rich, imported only here) or JSON lines.

Every sink buffers and writes once per `flush` (once per poll when following): one write call per batch keeps
plain output fast, and since each batch holds only whole lines, concurrent ranks never interleave in a line.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import BinaryIO, Protocol, TextIO

from ddpctl.logs.core import Source, decoded, format_time, render_json, render_plain
from ddpctl.logs.failures import ErrorHit
from ddpctl.sanitize import SAFE_ASCII, visible, visible_lines

# Prefix colours cycle by rank: a rank has the same colour in every attempt and every run of the command.
PALETTE = (
    "cyan",
    "green",
    "yellow",
    "magenta",
    "blue",
    "red",
    "bright_cyan",
    "bright_green",
    "bright_yellow",
    "bright_magenta",
    "bright_blue",
    "bright_red",
)


class Sink(Protocol):
    def lines(self, source: Source, lines: list[str], when: float | None = None) -> None: ...

    def note(self, text: str) -> None: ...

    def failure(self, source: Source, hit: ErrorHit) -> None: ...

    def flush(self) -> None: ...


class Buffered:
    """Output collected per poll and written in one call: fewer syscalls when a thousand ranks are busy. Kept as
    bytes and written to the binary stream under `out` where it has one (sys.stdout), so a follower's lines,
    read as bytes, are written without being decoded and encoded again."""

    def __init__(self, out: TextIO, timestamps: bool = False) -> None:
        self.out = out
        self.timestamps = timestamps  # --timestamps: each line's write time before its prefix
        self._buf: list[bytes] = []
        self._binary: BinaryIO | None = getattr(out, "buffer", None)
        # Text encoded as `out` would encode it; without a binary stream (a StringIO), decoded back losslessly.
        self.encoding = (getattr(out, "encoding", None) or "utf-8") if self._binary else "utf-8"
        self.errors = (getattr(out, "errors", None) or "strict") if self._binary else "surrogateescape"
        # ASCII bytes can be written as they are where `out` encodes ASCII as itself (not UTF-16, say).
        self.ascii_as_is = "ascii".encode(self.encoding, self.errors) == b"ascii"

    def text(self, text: str) -> bytes:
        return text.encode(self.encoding, self.errors)

    def flush(self) -> None:
        if not self._buf:
            return
        data = b"".join(self._buf)
        self._buf.clear()
        if self._binary is None:
            self.out.write(data.decode(self.encoding, self.errors))
            self.out.flush()
            return
        self.out.flush()  # anything written to the text layer first goes out first
        self._binary.write(data)
        self._binary.flush()


class PlainSink(Buffered):
    """Text for a terminal: rank output with control characters made visible unless `raw` (see sanitize)."""

    def __init__(self, out: TextIO, raw: bool = False, timestamps: bool = False) -> None:
        super().__init__(out, timestamps)
        self.raw = raw

    def prefix(self, source: Source) -> str:
        return visible(source.prefix)  # the node name comes from a file in the run dir: never trusted

    def lines(self, source: Source, lines: list[str], when: float | None = None) -> None:
        prefix = self.prefix(source)
        if self.timestamps:
            prefix = f"{format_time(when)} {prefix}"
        self._buf.append(self.text(render_plain(prefix, lines if self.raw else visible_lines(lines))))

    def ordered(self, sources: list[Source], runs: list[Sequence[bytes]], times: list[float]) -> None:
        """Runs of lines (bytes, as read) already in order, each of its source: one join for the batch, not a
        `lines` call per run (at 512 busy ranks in time order, consecutive lines mostly come from different
        ranks). Lines of safe ASCII (nearly all) are written as read; any other batch is decoded and shown as
        `lines` shows it."""
        if self.timestamps:
            for source, run, when in zip(sources, runs, times, strict=True):
                self.lines(source, decoded(run), when)
            return
        # By identity: one Source object per file, and hashing a dataclass per line would cost a Python call.
        ids = list(map(id, sources))
        unique = dict(zip(ids, sources, strict=True))
        prefixes = {key: self.text(self.prefix(source)) for key, source in unique.items()}
        lines = list(itertools.chain.from_iterable(runs))
        # With prefixes of safe ASCII (no colour, plain node names) the batch is checked once it is joined, else
        # the lines are checked first, apart.
        apart = self.raw or not self.ascii_as_is or bool(b"".join(prefixes.values()).translate(None, SAFE_ASCII))
        if apart and not self._as_read(lines):
            lines = self._shown(lines)
        out = _joined(prefixes, ids, runs, lines)
        if not apart and out.translate(None, SAFE_ASCII_LINES):
            out = _joined(prefixes, ids, runs, self._shown(lines))
        self._buf.append(out)

    def _as_read(self, lines: list[bytes]) -> bool:
        """Whether `lines` are shown exactly as read: ASCII (so decoding changes nothing), without a control
        character unless `raw` (so sanitize changes nothing either)."""
        if not self.ascii_as_is:
            return False
        joined = b"".join(lines)
        return joined.isascii() if self.raw else not joined.translate(None, SAFE_ASCII)

    def _shown(self, lines: list[bytes]) -> list[bytes]:
        """Lines that are not all safe ASCII, as `lines` shows them: decoded, made visible unless `raw`."""
        text = decoded(lines)
        return list(map(self.text, text if self.raw else visible_lines(text)))

    def note(self, text: str) -> None:
        self._buf.append(self.text((text if self.raw else visible(text)) + "\n"))

    def failure(self, source: Source, hit: ErrorHit) -> None:
        kind = ("  (collateral)" if hit.file else "  (NCCL/Gloo collateral)") if hit.collateral else ""
        self.lines(source, [f"{hit.where}: {hit.text}{kind}"])


SAFE_ASCII_LINES = SAFE_ASCII + b"\n"


def _joined(prefixes: dict[int, bytes], ids: list[int], runs: list[Sequence[bytes]], lines: list[bytes]) -> bytes:
    """Each line after its run's prefix (by the id of the run's source), each followed by a newline: one join, no
    bytes object per line."""
    parts: list[bytes] = [b"\n"] * (3 * len(lines))
    run_prefixes = map(prefixes.__getitem__, ids)
    if len(runs) == len(lines):  # a line per run (lines written at times of their own): no repeat per run
        parts[0::3] = run_prefixes
    else:
        parts[0::3] = itertools.chain.from_iterable(map(itertools.repeat, run_prefixes, map(len, runs)))
    parts[1::3] = lines
    return b"".join(parts)


class ColorSink(PlainSink):
    """Plain output with each prefix in its rank's colour; styles are rendered to ANSI once per source."""

    def __init__(self, out: TextIO, color_system: str, raw: bool = False, timestamps: bool = False) -> None:
        from rich.console import COLOR_SYSTEMS
        from rich.style import Style

        super().__init__(out, raw, timestamps)
        self._system = COLOR_SYSTEMS[color_system]
        self._style = Style
        self._prefixes: dict[Source, str] = {}

    def prefix(self, source: Source) -> str:
        cached = self._prefixes.get(source)
        if cached is None:
            style = self._style(color=PALETTE[source.rank % len(PALETTE)], bold=True)
            cached = style.render(visible(source.prefix).rstrip(), color_system=self._system) + " "
            self._prefixes[source] = cached
        return cached

    def note(self, text: str) -> None:
        shown = text if self.raw else visible(text)
        self._buf.append(self.text(self._style(dim=True).render(shown, color_system=self._system) + "\n"))


class JsonSink(Buffered):
    """One object per line: {"attempt", "node", "rank", "text"}; banners go to `err`, stdout stays JSON."""

    def __init__(self, out: TextIO, err: TextIO, raw: bool = False, timestamps: bool = False) -> None:
        super().__init__(out, timestamps)
        self.err = err
        self.raw = raw

    def lines(self, source: Source, lines: list[str], when: float | None = None) -> None:
        self._buf.append(self.text(render_json(source, lines, when, self.timestamps)))

    def note(self, text: str) -> None:
        self.flush()  # notes go to the terminal, not into JSON: they may quote a rank's line
        print(text if self.raw else visible(text), file=self.err, flush=True)

    def failure(self, source: Source, hit: ErrorHit) -> None:
        obj = {
            "attempt": source.attempt,
            "node": source.node,
            "rank": source.rank,
            "text": hit.text,
            "line": hit.line_no,
            "collateral": hit.collateral,
            **({"file": hit.file} if hit.file else {}),
        }
        self._buf.append(self.text(json.dumps(obj) + "\n"))


def make_sink(
    out: TextIO,
    err: TextIO,
    env: Mapping[str, str],
    *,
    json_lines: bool,
    no_color: bool,
    raw: bool = False,
    timestamps: bool = False,
) -> Sink:
    """JSON, or colour when allowed (not --no-color, no NO_COLOR, a terminal or FORCE_COLOR), else plain.
    `raw`: rank output as written, control characters included (--raw); `timestamps`: each line's write time."""
    if json_lines:
        return JsonSink(out, err, raw, timestamps)
    if no_color or env.get("NO_COLOR") or not (env.get("FORCE_COLOR") or out.isatty()):
        return PlainSink(out, raw, timestamps)
    from rich.console import Console

    system = Console(file=out).color_system
    return ColorSink(out, system, raw, timestamps) if system else PlainSink(out, raw, timestamps)
