"""Which paths a snapshot leaves out by pattern (pure): `.gitignore` files (dir mode) and the spec's
`snapshot_exclude` globs (both modes).

The part of gitignore's syntax people write: `#` comments, `!` negation (a later rule wins), a trailing `/` for
directories only, a `/` elsewhere anchoring the pattern to the directory the rule was written in (otherwise it
matches a name at any depth), `*`, `?`, `[...]` and `**`. A directory left out is not entered, so nothing
below it can be brought back (as in git). In `snapshot_exclude`, `!glob` also lists a data-like file
explicitly (`ddpctl.snapshot.walk.DATA_SUFFIXES`), which is then kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

MAX_RULES = 1000  # per .gitignore file: a generated one with more is cut (the walk stays bounded)


@dataclass(frozen=True)
class Rule:
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    anchored: bool  # matched against the path below `base`, else against the last name only
    base: str  # the directory (relative to the snapshot's root, "" for the root) the rule was written in


def _class(glob: str, start: int) -> tuple[str, int] | None:
    """A `[...]` character class starting at `start`: (its regex, the index after it), None when unclosed."""
    end = glob.find("]", start + 2)
    if end == -1:
        return None
    body = glob[start + 1 : end]
    if body.startswith("!"):
        body = "^" + body[1:]
    return "[" + body.replace("\\", "\\\\") + "]", end + 1


def translate(glob: str) -> str:
    """A gitignore glob as a regular expression over "/"-separated paths."""
    out: list[str] = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] in "*?":
            out.append("[^/]*" if glob[i] == "*" else "[^/]")
            i += 1
        elif glob[i] == "[" and (cls := _class(glob, i)) is not None:
            out.append(cls[0])
            i = cls[1]
        elif glob[i] == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


def rule(line: str, base: str = "") -> Rule | None:
    """One line of a .gitignore (or one `snapshot_exclude` entry); None for blanks and comments."""
    text = line.rstrip("\n").rstrip(" ") if not line.endswith("\\ ") else line.rstrip("\n")
    if not text or text.startswith("#"):
        return None
    negate = text.startswith("!")
    text = text[1:] if negate else text
    dir_only = text.endswith("/")
    text = text.rstrip("/")
    anchored = "/" in text
    text = text.lstrip("/")
    if not text:
        return None
    try:
        regex = re.compile(translate(text) + r"\Z", re.DOTALL)
    except re.error:
        return None  # a malformed class: git ignores such a pattern too
    return Rule(regex, negate, dir_only, anchored, base)


def parse(lines: Iterable[str], base: str = "") -> list[Rule]:
    rules = [r for line in lines if (r := rule(line, base)) is not None]
    return rules[:MAX_RULES]


def verdict(rules: Iterable[Rule], rel: str, is_dir: bool) -> bool | None:
    """True: left out; False: listed by a `!` rule; None: no rule speaks of `rel` (the last match wins)."""
    result = None
    for r in rules:
        if r.dir_only and not is_dir:
            continue
        if r.base and not rel.startswith(r.base + "/"):
            continue
        below = rel[len(r.base) + 1 :] if r.base else rel
        subject = below if r.anchored else below.rsplit("/", 1)[-1]
        if r.regex.match(subject):
            result = not r.negate
    return result


def excluded_path(rules: list[Rule], rel: str) -> bool:
    """Whether a file at `rel` is left out, by a rule on it or on a directory above it (git mode's filter)."""
    parts = rel.split("/")
    for depth in range(1, len(parts)):
        if verdict(rules, "/".join(parts[:depth]), True):
            return True
    return bool(verdict(rules, rel, False))
