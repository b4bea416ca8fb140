"""Expand and compress Slurm hostlist expressions exactly like `scontrol show hostnames` (Slurm 22.05).

Grammar, as scontrol parses it:
- hosts are separated by ',', space, tab, CR or LF outside brackets; empty items are skipped (`a,,b`);
- a bracket holds a comma list of `N` or `N-M` (digits only, N <= M); the width of the lower bound is the
  zero-padded width of every number it produces (`n[09-11]` -> n09 n10 n11, `n[9-011]` -> n9 n10 n11);
- several bracket groups form a cartesian product, but nothing may follow the last `]` (`a[1-2]b` is
  rejected by scontrol, `rack[1-2]-node[01-02]` is fine);
- order and duplicates are kept.

Where scontrol prints garbage instead of failing (unbalanced brackets: `n[1` -> `n]`, `n1]`; whitespace
or a sign inside brackets: `n[ 1-2]` -> n01 n02; an open range `n[1-]` -> n1; an empty list) we raise
HostlistError instead. One bracketed name may expand to at most MAX_HOSTS hosts: scontrol caps a single
range there, we also cap lists and products so a typo cannot allocate millions of names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ddpctl.errors import HostlistError

MAX_HOSTS = 65536  # scontrol's MAX_RANGE: one range may not hold more hosts than this

_SPLIT_RE = re.compile(r"[, \t\n\r]+")
# A name runs until a separator outside brackets; whatever lies between names must be separators only,
# so a stray `[` or `]` shows up as a gap that is not.
_NAME_RE = re.compile(r"(?:[^, \t\n\r\[\]]|\[[^\[\]]*\])+")
# A bracketed name: one or more `text[ranges]` pieces and nothing after the last `]` (scontrol's rule).
_BRACKETED_RE = re.compile(r"(?:[^\[\]]*\[[^\[\]]*\])+")
_PIECE_RE = re.compile(r"([^\[\]]*)\[([^\[\]]*)\]")
# 18 digits stay below 2**64, where scontrol's strtoul saturates (and `show hostnames` even crashes).
_RANGE_RE = re.compile(r"([0-9]{1,18})(?:-([0-9]{1,18}))?")
_TRAILING_DIGITS_RE = re.compile(r"^(.*?)([0-9]{1,18})$", re.DOTALL)
_FORBIDDEN_IN_NAME = frozenset("[], \t\n\r")


def expand(text: str) -> list[str]:
    """Return the host names of a Slurm hostlist expression, in scontrol's order, duplicates kept."""
    if "[" not in text and "]" not in text:
        hosts = [tok for tok in _SPLIT_RE.split(text) if tok]
    else:
        hosts = []
        for tok in _names(text):
            hosts.extend(_expand_token(tok, text))
    if not hosts:
        raise HostlistError(f"invalid hostlist {text!r}: no host names in it")
    return hosts


def _names(text: str) -> list[str]:
    names = []
    pos = 0
    for match in _NAME_RE.finditer(text):
        _check_gap(text, pos, match.start())
        names.append(match.group())
        pos = match.end()
    _check_gap(text, pos, len(text))
    return names


def _check_gap(text: str, start: int, end: int) -> None:
    if _SPLIT_RE.fullmatch(text, start, end) is None and start != end:
        raise HostlistError(f"invalid hostlist {text!r}: unbalanced or nested brackets at {text[start:end].strip()!r}")


def _expand_token(tok: str, text: str) -> list[str]:
    if "[" not in tok and "]" not in tok:
        return [tok]
    if _BRACKETED_RE.fullmatch(tok) is None:
        raise HostlistError(f"invalid hostlist {text!r}: {tok!r} has text after its last ']' (Slurm allows none)")
    pieces = _PIECE_RE.findall(tok)
    groups = [_parse_ranges(body, tok, text) for _, body in pieces]
    total = 1
    for items in groups:
        total *= sum(hi - lo + 1 for lo, hi, _ in items)
    if total > MAX_HOSTS:
        raise HostlistError(f"invalid hostlist {text!r}: {tok!r} expands to {total} hosts (at most {MAX_HOSTS})")
    strings = [_group_strings(prefix, items) for (prefix, _), items in zip(pieces, groups, strict=True)]
    return _product(strings)


def _parse_ranges(body: str, tok: str, text: str) -> list[tuple[int, int, int]]:
    """`1,3-5,09` -> [(lo, hi, width), ...]; width is the length of the lower bound as written."""
    items = []
    count = 0
    for item in body.split(","):
        match = _RANGE_RE.fullmatch(item)
        if match is None:
            raise HostlistError(
                f"invalid hostlist {text!r}: bad range {item!r} in {tok!r} (expected N or N-M: up to 18 digits)"
            )
        lo_text, hi_text = match.groups()
        lo = int(lo_text)
        hi = lo if hi_text is None else int(hi_text)
        if hi < lo:
            raise HostlistError(f"invalid hostlist {text!r}: range {item!r} in {tok!r} goes downwards")
        count += hi - lo + 1
        if count > MAX_HOSTS:
            raise HostlistError(f"invalid hostlist {text!r}: {tok!r} holds more than {MAX_HOSTS} hosts")
        items.append((lo, hi, len(lo_text)))
    return items


def _group_strings(prefix: str, items: list[tuple[int, int, int]]) -> list[str]:
    escaped = prefix.replace("%", "%%")
    out: list[str] = []
    for lo, hi, width in items:
        out.extend(map(f"{escaped}%0{width}d".__mod__, range(lo, hi + 1)))
    return out


def _product(strings: list[list[str]]) -> list[str]:
    """Slurm's order: the last group varies fastest, the others nest from the second-to-last outwards.

    scontrol splits at the last `[` and expands the prefix recursively, again from its last group, so
    `a[1-2]b[1-2]c[1-2]` gives a1b1c1 a1b1c2 a2b1c1 a2b1c2 a1b2c1 ... (b outermost, then a, then c).
    """
    if len(strings) == 1:
        return strings[0]
    acc = strings[0]
    for group in strings[1:-1]:
        acc = [head + tail for tail in group for head in acc]
    last = strings[-1]
    return [head + tail for head in acc for tail in last]


def compress(hosts: Sequence[str]) -> str:
    """A hostlist expression that `expand` (and scontrol) turn back into exactly `hosts`, in order.

    Consecutive hosts that share a prefix are folded into one `prefix[a-b,c]` name; a run only continues
    while the next number, printed with the run's width, reproduces the host name exactly.
    """
    tokens: list[str] = []
    prefix: str | None = None
    items: list[list[int]] = []  # [lo, hi, width]
    count = 0
    for host in hosts:
        _check_name(host)
        match = _TRAILING_DIGITS_RE.match(host)
        if match is None:
            _flush(tokens, prefix, items)
            prefix, items, count = None, [], 0
            tokens.append(host)
            continue
        head, digits = match.groups()
        if head != prefix or count >= MAX_HOSTS:
            _flush(tokens, prefix, items)
            prefix, items, count = head, [], 0
        _add_number(items, int(digits), len(digits))
        count += 1
    _flush(tokens, prefix, items)
    return ",".join(tokens)


def _check_name(host: str) -> None:
    if not host or not _FORBIDDEN_IN_NAME.isdisjoint(host):
        raise HostlistError(f"cannot write host name {host!r} in a hostlist (empty, or has a separator or bracket)")


def _add_number(items: list[list[int]], number: int, digits: int) -> None:
    if items:
        last = items[-1]
        # n09,n10 joins n[09-10]; n01,n2 cannot (n[01-2] would print n02).
        if number == last[1] + 1 and len(f"{number:0{last[2]}d}") == digits:
            last[1] = number
            return
    items.append([number, number, digits])


def _flush(tokens: list[str], prefix: str | None, items: list[list[int]]) -> None:
    if prefix is None or not items:
        return
    if len(items) == 1 and items[0][0] == items[0][1]:
        tokens.append(f"{prefix}{items[0][0]:0{items[0][2]}d}")
        return
    parts = (f"{lo:0{w}d}" if lo == hi else f"{lo:0{w}d}-{hi:0{w}d}" for lo, hi, w in items)
    tokens.append(f"{prefix}[{','.join(parts)}]")
