"""The cluster's code trees (ddpctl.remote.trees): read-only once built, verified against their id before a later
submit reuses one, and `snapshot: off` refused however it comes (issue 43: a run changed the shared tree, and
later unchanged submits, "sent 0 objects", ran the changed code)."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import pytest

from ddpctl.errors import SpecError
from ddpctl.remote.receive import remote_spec
from ddpctl.remote.trees import intact, tree
from ddpctl.snapshot.copy import Item
from ddpctl.snapshot.store import open_store, put

FILES = {"train.py": b"print('train')\n", "lib/words.py": b"WORD = 'hello'\n"}


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, list[Item], Path]:
    """(the store, the listing, the cluster's ddpctl home)"""
    store = open_store(tmp_path / "home")
    items = []
    for path, data in FILES.items():
        source = tmp_path / "src" / path
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_bytes(data)
        items.append(Item(path, "exec" if path == "train.py" else "file", 0o755 if path == "train.py" else 0o644,
                          put(store, source, len(data)), len(data)))  # fmt: skip
    items.append(Item("lib/again.py", "link", 0, "words.py", 0))
    return store, items, tmp_path / "home"


def writable(root: Path) -> list[str]:
    return [
        os.path.relpath(Path(d) / n, root)
        for d, dirs, files in os.walk(root)
        for n in [*dirs, *files]
        if not (Path(d) / n).is_symlink() and (Path(d) / n).lstat().st_mode & 0o222
    ]


def make_writable(path: Path) -> None:
    path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o200)


def test_a_tree_is_read_only_to_everyone_once_built(built: tuple[Path, list[Item], Path]) -> None:
    store, items, home = built
    code = tree(store, items, home)
    assert (code / "lib" / "words.py").read_bytes() == FILES["lib/words.py"]
    assert writable(code) == [] and not code.stat().st_mode & 0o222  # .git too
    assert intact(code, items)
    assert tree(store, items, home) == code  # reused as it is


@pytest.mark.parametrize(
    "change",
    [
        "edit",  # a run wrote into the tree
        "add",  # a leftover file
        "relink",
        "chmod",  # the exec bit of the script
    ],
)
def test_a_changed_tree_is_rebuilt_before_it_is_reused(built: tuple[Path, list[Item], Path], change: str) -> None:
    store, items, home = built
    code = tree(store, items, home)
    make_writable(code)
    make_writable(code / "lib")
    if change == "edit":
        make_writable(code / "lib" / "words.py")
        (code / "lib" / "words.py").write_bytes(b"WORD = 'changed'\n")
    elif change == "add":
        (code / "lib" / "helper.py").write_text("")
    elif change == "relink":
        (code / "lib" / "again.py").unlink()
        (code / "lib" / "again.py").symlink_to("/etc/passwd")
    else:
        (code / "train.py").chmod(0o444)
    assert not intact(code, items)
    again = tree(store, items, home)
    assert again == code and intact(again, items) and writable(again) == []
    assert (again / "lib" / "words.py").read_bytes() == FILES["lib/words.py"]
    assert sorted(p.name for p in (again / "lib").iterdir()) == ["again.py", "words.py"]
    assert [p.name for p in again.parent.iterdir()] == [code.name]  # nothing of the old one left


@pytest.mark.parametrize(
    ("text", "defaults", "overrides"),
    [
        ("name: far\nscript: train.py\n", {"snapshot": "off"}, []),  # the profile's default
        ("name: far\nscript: train.py\nsnapshot: off\n", {}, []),
        ("name: far\nscript: train.py\n", {}, ["snapshot=off"]),
    ],
)
def test_snapshot_off_is_refused_however_it_comes(
    tmp_path: Path, text: str, defaults: dict[str, str], overrides: list[str]
) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "train.py").write_text("")
    with pytest.raises(SpecError, match=r"snapshot: off \(the spec's, an override's or the cluster profile's"):
        remote_spec(tmp_path / "tree", "job.yaml", text, defaults, overrides, cwd=tmp_path)
    plain = "name: far\nscript: train.py\n"
    assert remote_spec(tmp_path / "tree", "job.yaml", plain, {}, [], cwd=tmp_path).snapshot == "auto"
