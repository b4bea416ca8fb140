"""Reading a job spec's YAML while remembering where every key came from.

The document is composed into PyYAML's node tree (SafeLoader, so no arbitrary tags) and converted by hand,
so that each key path keeps the line it was written on and each unquoted non-string scalar keeps its source
text. The source text matters because YAML 1.1 reads `time: 1:30:00` as the integer 5400 (base 60) and
`partition: on` as true: string fields take such scalars exactly as written.

`Doc` is the parsed spec plus that bookkeeping; `At` is one key path in it and builds the one-line `SpecError`
messages (`jobs/x.yaml:7: nodes: got 0, expected an integer >= 1`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ddpctl import safeio
from ddpctl.errors import SpecError
from ddpctl.record import Record

Key = tuple[str, ...]
_MERGE_TAG = "tag:yaml.org,2002:merge"
_SHOW_MAX = 60
_MAX_NODES = 100_000  # YAML values in one spec, aliases and merge keys expanded (a spec has a few dozen)
MAX_SPEC_BYTES = 1 << 20  # a spec file is a few hundred bytes; this keeps a stray huge file from eating memory
_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a float", str: "a string", list: "a list"}
_TYPE_NAMES[dict] = "a mapping"


@dataclass
class Doc:
    """A spec mapping plus, per key path: its YAML line, its unquoted source text, the --set that wrote it."""

    source: str
    data: dict[str, Any]
    lines: dict[Key, int] = field(default_factory=dict)
    raws: dict[Key, str] = field(default_factory=dict)
    origins: dict[Key, str] = field(default_factory=dict)

    def where(self, path: Key) -> str:
        """`--set k=v` if an override wrote this path (or a parent), else `file:line`, else `file`."""
        prefixes = [path[:n] for n in range(len(path), 0, -1)] or [()]  # () is the document itself
        for prefix in prefixes:
            if prefix in self.origins:
                return self.origins[prefix]
        for prefix in prefixes:
            if prefix in self.lines:
                return f"{self.source}:{self.lines[prefix]}"
        return self.source

    def overridden(self, path: Key) -> bool:
        """Whether a --set wrote this path or a section holding it."""
        return any(path[:n] in self.origins for n in range(1, len(path) + 1))

    def forget(self, path: Key) -> None:
        """Drop the bookkeeping of `path` and everything under it (an override is replacing it)."""
        for table in (self.lines, self.raws, self.origins):
            for key in [k for k in table if k[: len(path)] == path]:
                del table[key]


@dataclass(frozen=True, eq=False, repr=False)  # eq, hash, repr: Record (start-up time)
class At(Record):
    """One key path in a Doc: the place an error message points at."""

    doc: Doc
    path: Key = ()

    @property
    def key(self) -> str:
        return one_line(".".join(self.path)) or "top level"

    def child(self, name: str) -> At:
        return At(self.doc, (*self.path, name))

    def raw(self) -> str | None:
        return self.doc.raws.get(self.path)

    def error(self, message: str) -> SpecError:
        return SpecError(f"{one_line(self.doc.where(self.path))}: {self.key}: {message}")

    def fail(self, value: object, expected: str, *, typed: bool = False) -> SpecError:
        kind = f" ({type_name(value)})" if typed and value is not None else ""
        return self.error(f"got {show(value)}{kind}, expected {expected}")


def type_name(value: object) -> str:
    if value is None:
        return "null"
    return _TYPE_NAMES.get(type(value), f"a {type(value).__name__}")


def show(value: object) -> str:
    """A value as the user would write it, on one line and cut short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value) if isinstance(value, (str, list, dict, tuple)) else str(value)
    return text if len(text) <= _SHOW_MAX else text[: _SHOW_MAX - 3] + "..."


def one_line(text: str) -> str:
    return text if text.isprintable() else repr(text)


def read_doc(path: str | Path, *, nofollow: bool = False) -> Doc:
    source = str(path)
    try:
        fd = safeio.open_read(path) if nofollow else os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(MAX_SPEC_BYTES + 1)
        if len(data) > MAX_SPEC_BYTES:
            raise SpecError(f"{one_line(source)}: spec file larger than {MAX_SPEC_BYTES} bytes, expected a job spec")
        text = data.decode("utf-8")
    except OSError as err:
        raise SpecError(f"{one_line(source)}: cannot read spec file: {err.strerror or err}") from err
    except UnicodeDecodeError as err:
        raise SpecError(f"{one_line(source)}: cannot read spec file: not UTF-8 text ({err.reason})") from err
    doc = Doc(source, {})
    root = parse_yaml(text, doc, ())
    if root is None:
        raise SpecError(f"{source}: empty spec, expected a mapping with at least 'name' and 'script'")
    if not isinstance(root, dict):
        raise At(doc).fail(root, "a mapping of spec keys (name: ..., script: ...)", typed=True)
    doc.data = root
    return doc


def parse_yaml(text: str, doc: Doc, base: Key, override: str | None = None) -> Any:
    """Parse one YAML document into plain Python values, recording lines and raw scalars under `base`.

    `override` is the `--set` text when parsing its value: errors then name it instead of a file line.
    """
    try:
        loader = yaml.SafeLoader(text)  # the reader rejects control characters here already
    except yaml.reader.ReaderError as err:
        raise SpecError(f"{_reader_where(err, text, doc, override)}: invalid YAML: {_reader_problem(err)}") from err
    try:
        node = loader.get_single_node()
        if node is not None:
            doc.lines.setdefault(base, node.start_mark.line + 1)
        return None if node is None else _Builder(loader, doc).build(node, base)
    except yaml.reader.ReaderError as err:
        raise SpecError(f"{_reader_where(err, text, doc, override)}: invalid YAML: {_reader_problem(err)}") from err
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = override or (doc.source if mark is None else f"{doc.source}:{mark.line + 1}")
        problem = ", ".join(p for p in (err.context, err.problem) if p) or "syntax error"
        raise SpecError(f"{where}: invalid YAML: {' '.join(problem.split())}") from err
    except yaml.YAMLError as err:
        raise SpecError(f"{override or doc.source}: invalid YAML: {' '.join(str(err).split())}") from err
    except RecursionError as err:
        raise SpecError(f"{override or doc.source}: invalid YAML: nested too deeply for a job spec") from err
    finally:
        loader.dispose()


def _reader_where(err: yaml.reader.ReaderError, text: str, doc: Doc, override: str | None) -> str:
    if override:
        return one_line(override)
    return f"{one_line(doc.source)}:{text.count(chr(10), 0, max(err.position, 0)) + 1}"


def _reader_problem(err: yaml.reader.ReaderError) -> str:
    char = err.character if isinstance(err.character, str) else chr(err.character)
    if 0xDC80 <= ord(char) <= 0xDCFF:  # how Python hands over a byte of a command-line argument that is not UTF-8
        return f"byte 0x{ord(char) - 0xDC00:02X} is not UTF-8 text"
    return (
        f"character U+{ord(char):04X} is not allowed in YAML text "
        '(write it as an escape inside a double-quoted string, e.g. "\\t")'
    )


class _Builder:
    def __init__(self, loader: yaml.SafeLoader, doc: Doc) -> None:
        self.loader = loader
        self.doc = doc
        self.active: set[int] = set()  # nodes being built: an alias back to one of them is a cycle
        self.budget = _MAX_NODES  # aliases are expanded into copies: stop a "billion laughs" document

    def build(self, node: yaml.Node, path: Key) -> Any:
        if id(node) in self.active:
            raise At(self.doc, path).error("recursive YAML alias, expected plain data")
        self.active.add(id(node))
        self.budget -= 1
        if self.budget < 0:
            raise At(self.doc, path).error(f"more than {_MAX_NODES} YAML values (aliases expanded), expected a spec")
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            if isinstance(node, yaml.SequenceNode):
                return [self._item(item, (*path, str(i))) for i, item in enumerate(node.value)]
            value = self.loader.construct_object(node, deep=True)
            if isinstance(node, yaml.ScalarNode) and node.style is None and not isinstance(value, str):
                self.doc.raws[path] = str(node.value)
            return value
        finally:
            self.active.discard(id(node))

    def _item(self, node: yaml.Node, path: Key) -> Any:
        self.doc.lines[path] = node.start_mark.line + 1
        return self.build(node, path)

    def _mapping(self, node: yaml.MappingNode, path: Key) -> dict[str, Any]:
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            name, line = self._key(key_node, path), key_node.start_mark.line + 1
            if key_node.tag != _MERGE_TAG and name in seen:
                key: Key = (*path, name)
                self.doc.lines[key] = line
                raise At(self.doc, key).error(f"duplicate key, first set on line {seen[name]}")
            seen[name] = line
        self._check_merge_size(node, path)
        self.loader.flatten_mapping(node)  # resolves `<<: *anchor` merges; later keys win, as in PyYAML
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            name = self._key(key_node, path)
            key = (*path, name)
            self.doc.lines[key] = key_node.start_mark.line + 1
            out[name] = self.build(value_node, key)
        return out

    def _check_merge_size(self, node: yaml.MappingNode, path: Key) -> None:
        """Refuse a merge-key bomb before PyYAML's flatten_mapping copies it: nested `<<: [*a, *a]` doubles
        the pairs at every level (832 bytes took 21 s and 4 GB). Sizes are memoised per node: linear."""
        sizes: dict[int, int] = {}
        visiting: set[int] = set()

        def size(mapping: yaml.MappingNode, depth: int) -> int:
            if id(mapping) in sizes:
                return sizes[id(mapping)]
            if depth > 100 or id(mapping) in visiting:
                raise At(self.doc, path).error("recursive or too deeply nested YAML merge (<<), expected plain data")
            visiting.add(id(mapping))
            total = 0
            for key_node, value_node in mapping.value:
                if key_node.tag != _MERGE_TAG:
                    total += 1
                    continue
                merged = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                total += sum(size(m, depth + 1) for m in merged if isinstance(m, yaml.MappingNode))
            visiting.discard(id(mapping))
            sizes[id(mapping)] = total
            if total > self.budget:
                raise At(self.doc, path).error(
                    f"more than {_MAX_NODES} YAML values (merge keys expanded), expected a spec"
                )
            return total

        size(node, 0)

    def _key(self, node: yaml.Node, path: Key) -> str:
        if not isinstance(node, yaml.ScalarNode):
            key: Key = (*path, "?")
            self.doc.lines[key] = node.start_mark.line + 1
            kind = "list" if isinstance(node, yaml.SequenceNode) else "mapping"
            raise At(self.doc, key).error(f"got a {kind} as a key, expected a plain key name")
        return str(node.value)  # as written: `on:` is the key 'on', not true
