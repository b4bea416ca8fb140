"""The gitignore subset snapshots honour (ddpctl.snapshot.ignore), as a literal table."""

from __future__ import annotations

import pytest

from ddpctl.snapshot.ignore import excluded_path, parse, verdict


@pytest.mark.parametrize(("lines", "path", "is_dir", "expected"), [
    (["*.log"], "a/b/run.log", False, True),  # no slash: a name at any depth
    (["/build"], "build", True, True),  # leading slash: anchored
    (["/build"], "src/build", True, None),
    (["data/"], "data", False, None),  # trailing slash: directories only
    (["data/"], "x/data", True, True),
    (["docs/*.md"], "docs/a.md", False, True),
    (["docs/*.md"], "docs/sub/a.md", False, None),  # * does not cross /
    (["**/tmp"], "a/b/tmp", True, True),
    (["a/**/z.py"], "a/z.py", False, True),
    (["a/**/z.py"], "a/b/c/z.py", False, True),
    (["*.pt", "!keep.pt"], "keep.pt", False, False),  # a later ! lists the file
    (["!keep.pt", "*.pt"], "keep.pt", False, True),  # the last match wins
    (["file[0-9].txt"], "file7.txt", False, True),
    (["file[!0-9].txt"], "file7.txt", False, None),
    (["# comment", "", "   "], "anything", False, None),
    (["\\#hash"], "#hash", False, True),
])  # fmt: skip
def test_verdict(lines: list[str], path: str, is_dir: bool, expected: bool | None) -> None:
    assert verdict(parse(lines), path, is_dir) is expected


def test_rules_of_a_subdirectory_speak_only_below_it() -> None:
    rules = parse(["/out", "*.tmp"], base="pkg")
    assert (verdict(rules, "pkg/out", True), verdict(rules, "out", True), verdict(rules, "pkg/x/a.tmp", False)) == (
        True,
        None,
        True,
    )


def test_a_file_under_an_excluded_directory_is_excluded() -> None:
    assert excluded_path(parse(["outputs/"]), "outputs/run/1.txt")
    assert not excluded_path(parse(["outputs/"]), "src/outputs.py")
