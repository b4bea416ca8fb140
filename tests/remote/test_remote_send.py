"""The pure parts of `submit --cluster` and remote `logs -f`: the object stream's headers, the tree listing's
checks, the spec read as from its place in the tree, the stored object checked against its id, and the
resumable position of a reconnected follow; literal tables."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ddpctl.errors import SpecError
from ddpctl.logs.core import Source
from ddpctl.remote.follow import Line, Resume, parse
from ddpctl.remote.receive import (
    Header,
    header,
    items_of,
    missing,
    parse_header,
    receive_all,
    remote_spec,
    store_of,
)
from ddpctl.remote.trees import tree_of
from ddpctl.snapshot.store import open_store

OID = "0123456789abcdef0123456789abcdef01234567"


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (f"{OID} 0\n".encode(), Header(OID, 0)),
        (f"{OID} 12345\n".encode(), Header(OID, 12345)),
        (f"{OID} -1\n".encode(), None),
        (f"{OID.upper()} 1\n".encode(), None),
        (f"{OID[:39]} 1\n".encode(), None),
        (f"{OID} 1 2\n".encode(), None),
        (f"{OID} {2**31}\n".encode(), None),  # beyond any snapshot's object
        (b"\n", None),
    ],
)
def test_object_headers(line: bytes, expected: Header | None) -> None:
    if expected is None:
        with pytest.raises(SpecError, match="code-put: "):
            parse_header(line)
    else:
        assert parse_header(line) == expected
        assert header(expected.oid, expected.size) == line


@pytest.mark.parametrize(
    ("path", "ok"),
    [("train.py", True), ("lib/a.py", True), ("../x", False), ("/etc/passwd", False), (".git/config", False),
     ("a/../../b", False), ("", False)],
)  # fmt: skip
def test_tree_paths_stay_in_the_tree(path: str, ok: bool) -> None:
    row = [[path, "file", 0o644, OID, 1]]
    if ok:
        assert items_of(row)[0].path == path
    else:
        with pytest.raises(SpecError, match="refused tree path"):
            items_of(row)


def stream(tmp_path: Path, data: bytes) -> int:
    path = tmp_path / "stream"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY)


def test_received_objects_are_stored_under_the_id_of_their_bytes_only(tmp_path: Path) -> None:
    store = open_store(tmp_path / "home")
    good, other = b"print('hi')\n", b"evil\n"
    fd = stream(tmp_path, header(blob_id(good), len(good)) + good)
    assert receive_all(store, fd) == (1, len(good))
    assert missing(store, [[blob_id(good), len(good)], [blob_id(other), len(other)]]) == [blob_id(other)]
    planted = stream(tmp_path, header(blob_id(good + b"x"), len(other)) + other)  # bytes not of the id
    with pytest.raises(SpecError, match="hash to"):
        receive_all(store, planted)
    short = stream(tmp_path, header(blob_id(other), 10) + other)  # the stream ends early
    with pytest.raises(SpecError, match="ended after 5 of 10 bytes"):
        receive_all(store, short)
    assert missing(store, [[blob_id(other), len(other)]]) == [blob_id(other)]
    assert list((store / "tmp").iterdir()) == []  # nothing half-written left


def test_the_spec_means_in_the_tree_what_it_means_on_the_laptop(tmp_path: Path) -> None:
    tree, work = tmp_path / "tree", tmp_path / "work"
    (tree / "jobs").mkdir(parents=True)
    (tree / "train.py").write_text("")
    text = "name: far\nscript: ../train.py\ncheckpoint: {dir: ckpt}\n"
    defaults = {"account": "proj", "partition": "gpu", "run_dir": "/scratch/runs"}
    spec = remote_spec(tree, "jobs/job.yaml", text, defaults, [], cwd=work)
    assert (spec.script, spec.partition, spec.account) == (str(tree / "train.py"), "gpu", "proj")
    assert spec.run_dir == "/scratch/runs"  # the profile's default
    assert spec.checkpoint.dir == str(work / "ckpt")  # data paths stay on the cluster
    plain = remote_spec(tree, "jobs/job.yaml", "name: far\nscript: ../train.py\nrun_dir: runs\n", {}, [], cwd=work)
    assert plain.run_dir == str(work / "runs")
    with pytest.raises(SpecError, match="refused spec path"):
        remote_spec(tree, "../job.yaml", text, {}, [], cwd=work)


@pytest.mark.parametrize(
    ("events", "shown"),
    [
        # (attempt, rank) received; None: the connection dropped and the remote logs started again
        ([(0, 0), (0, 1), (0, 0)], [True, True, True]),
        ([(0, 0), (0, 0), None, (0, 0), (0, 0), (0, 0)], [True, True, False, False, True]),
        ([(0, 0), (0, 1), None, (0, 1), (0, 1), (0, 0)], [True, True, False, True, False]),
        ([(0, 0), None, (1, 0), (0, 0)], [True, True, False]),  # a new attempt: its own count
    ],
)
def test_a_reconnected_follow_shows_each_line_once(events: list[tuple[int, int] | None], shown: list[bool]) -> None:
    resume, got = Resume(), []
    for event in events:
        if event is None:
            resume.restart()
        else:
            got.append(resume.fresh(*event))
    assert got == shown


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"attempt": 1, "node": "n1", "rank": 3, "text": "x\\u001b", "time": 5.5}\n',
         Line(Source(1, "n1", 3), "x\x1b", 5.5)),
        (b'{"attempt": 0, "node": null, "rank": 0, "text": "y"}\n', Line(Source(0, None, 0), "y", None)),
        (b'{"attempt": "0", "rank": 0, "text": "y"}\n', None),
        (b"[ddpctl] not json\n", None),
        (b"[1, 2]\n", None),
    ],
)  # fmt: skip
def test_remote_log_lines(raw: bytes, expected: Line | None) -> None:
    assert parse(raw) == expected


@pytest.mark.parametrize(
    ("listing", "ok"),
    [
        ([["lib", "link", 0, "src", 0], ["src/a.py", "file", 0o644, OID, 1]], True),
        ([["sub/l", "link", 0, "../train.py", 0]], True),
        ([["data", "link", 0, "/datasets/x", 0]], True),  # absolute: data, kept as the snapshot keeps it
        ([["a", "link", 0, "/tmp", 0], ["a/x", "file", 0o644, OID, 1]], False),  # written through the link
        ([["a", "link", 0, "b", 0], ["a/b/c/x.py", "file", 0o644, OID, 1]], False),
        ([["sub/l", "link", 0, "../../outside", 0]], False),
        ([["l", "link", 0, "..", 0]], False),
        ([["l", "link", 0, ".git/hooks", 0]], False),
        ([["l", "link", 0, "", 0]], False),
        ([["x.py", "file", 0o644, OID, 1], ["x.py", "link", 0, "/tmp/x", 0]], False),  # listed twice
    ],
)
def test_links_never_lead_out_of_the_tree(listing: list[list[object]], ok: bool) -> None:
    if ok:
        assert [item.path for item in items_of(listing)] == [row[0] for row in listing]
    else:
        with pytest.raises(SpecError, match="remote submit: refused"):
            items_of(listing)


def test_a_listing_cannot_write_outside_the_tree_through_a_link(tmp_path: Path) -> None:
    """The cluster side followed a link entry and wrote the file under it outside its tree."""
    env = {"DDPCTL_HOME": str(tmp_path / "home")}
    store = store_of(env)
    data = b"planted\n"
    assert receive_all(store, stream(tmp_path, header(blob_id(data), len(data)) + data)) == (1, len(data))
    outside = tmp_path / "outside"
    outside.mkdir()
    listing = [["a", "link", 0, str(outside), 0], ["a/x", "file", 0o644, blob_id(data), len(data)]]
    with pytest.raises(SpecError, match="under a link"):
        tree_of(store, items_of(listing), env)
    assert list(outside.iterdir()) == []
