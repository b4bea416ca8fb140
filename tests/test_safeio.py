"""safeio, the one place files are opened without following links and written atomically: real files, real
links, a real FIFO; and the readers and the registry that now go through it."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ddpctl import safeio
from ddpctl.errors import DdpctlError
from ddpctl.run.layout import RunLayout
from ddpctl.run.registry import JobRecord, Registry
from ddpctl.run.stoptruth import read_listeners

RECORD = JobRecord(job_id="local-1", name="x", run_dir="/nowhere", backend="local", submitted_at=1.0)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if ".tmp" in p.name)


@pytest.mark.parametrize("durable", [False, True])
def test_write_atomic_replaces_the_file_whole(tmp_path: Path, durable: bool) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    safeio.write_bytes_atomic(target, b"new", durable=durable)
    assert target.read_text() == "new"
    assert leftovers(tmp_path) == []


def test_a_failing_writer_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")

    def fail(fd: int) -> None:
        os.write(fd, b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        safeio.write_atomic(target, fail)
    assert target.read_text() == "old"
    assert leftovers(tmp_path) == []


def test_a_stale_temp_file_of_our_pid_does_not_block_the_write(tmp_path: Path) -> None:
    """A container's pids repeat after a requeue: a temp file a killed process left under our name is reused."""
    target = tmp_path / "out.json"
    stale = tmp_path / f".out.json.tmp{safeio.HOST}-{os.getpid()}-{threading.get_native_id()}"
    stale.write_text("stale")
    safeio.write_text_atomic(target, "second")
    assert target.read_text() == "second"
    assert leftovers(tmp_path) == []


WRITER = """
import sys
from pathlib import Path
from ddpctl import safeio
errors = []
for i in range(int(sys.argv[2])):
    try:
        safeio.write_text_atomic(Path(sys.argv[1]), f"{i}\\n")
    except OSError as err:
        errors.append(err.strerror)
print(len(errors), errors[:1])
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None, reason="new pid namespaces need root")
def test_two_nodes_with_the_same_pids_write_one_shared_file_without_taking_each_others_temp(tmp_path: Path) -> None:
    """Podman gives each node's container a pid namespace of its own, so the same ranks of two nodes have the same
    pid and thread id, and every rank claims a checkpoint's OWNER in the shared directory: with only the pid and
    thread in the temp name, one node renamed the other's temp file away ("cannot write checkpoint file
    .../OWNER: No such file or directory"). Two writers as pid 1 of their own namespaces, on hosts of their own."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    target = tmp_path / "OWNER"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [
        subprocess.Popen(
            [
                "unshare",
                "--pid",
                "--fork",
                "--uts",
                "sh",
                "-c",
                'hostname "$1"; exec "$2" "$3" "$4" 3000',
                "sh",
                f"node{n}",
                sys.executable,
                str(script),
                str(target),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        for n in (1, 2)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert [o.split()[0] for o in outs] == ["0", "0"], outs
    assert leftovers(tmp_path) == []


def test_a_link_at_the_target_is_replaced_not_written_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.write_text("keep")
    link = tmp_path / "stopped.json"
    link.symlink_to(outside)
    safeio.write_json_atomic(link, {"step": 3})
    assert outside.read_text() == "keep"
    assert not link.is_symlink() and json.loads(link.read_text()) == {"step": 3}


def test_write_text_atomic_names_the_target_when_the_directory_is_missing(tmp_path: Path) -> None:
    target = tmp_path / "gone" / "out.json"
    with pytest.raises(FileNotFoundError) as err:
        safeio.write_text_atomic(target, "x")
    assert err.value.filename == str(target)


def test_read_bounded_refuses_a_link_and_does_not_hang_on_a_fifo(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("0123456789")
    link = tmp_path / "progress-0.json"
    link.symlink_to(real)
    fifo = tmp_path / "progress-1.json"
    os.mkfifo(fifo)
    assert safeio.read_bounded(real, 4) == b"0123"
    assert safeio.read_bounded(real, 4, tail=True) == b"6789"
    assert safeio.read_bounded(link) is None
    assert safeio.read_bounded(fifo) == b""  # no writer: empty at once, not blocked
    assert safeio.read_bounded(tmp_path / "missing") is None


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b'{"step": 3}', {"step": 3}),
        (b'{"step": 3', None),  # torn: being rewritten
        (b"[1, 2]", None),  # not an object
        (b"", None),
        (json.dumps({"pad": "x" * 300_000}).encode(), None),  # over the bound: not ours
    ],
    ids=["object", "torn", "list", "empty", "too-big"],
)
def test_read_json_gives_an_object_or_none(tmp_path: Path, content: bytes, expected: object) -> None:
    path = tmp_path / "record.json"
    path.write_bytes(content)
    assert safeio.read_json(path) == expected


def test_a_linked_listen_marker_is_not_believed(tmp_path: Path) -> None:
    """stoptruth read listen markers with read_text (following links, unbounded); now through safeio."""
    layout = RunLayout(tmp_path)
    layout.attempt_dir(0).mkdir()
    layout.listen_marker(0, 0).write_text(json.dumps({"rank": 0, "how": "StopAgreement"}))
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"rank": 1, "how": "planted"}))
    layout.listen_marker(0, 1).symlink_to(elsewhere)
    assert read_listeners(layout, 0) == ("rank 0: StopAgreement",)


def test_a_new_registry_is_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        Registry(tmp_path).add(RECORD)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "registry.jsonl").stat().st_mode) == 0o600


def test_a_linked_registry_is_refused_before_submit_and_never_appended_through(tmp_path: Path) -> None:
    outside = tmp_path / "outside.jsonl"
    outside.write_text("")
    home = tmp_path / "home"
    home.mkdir()
    (home / "registry.jsonl").symlink_to(outside)
    registry = Registry(home)
    with pytest.raises(DdpctlError, match=r"registry .* is not writable"):
        registry.check_writable()
    with pytest.raises(OSError) as err:
        registry.add(RECORD)
    assert err.value.errno == errno.ELOOP
    assert outside.read_text() == ""


def test_a_private_directory_is_judged_in_one_place(tmp_path: Path) -> None:
    """safeio.private_dir_problem: the snapshot store, the ssh socket directory and the template cache ask it."""
    made = tmp_path / "a" / "b"
    assert safeio.private_dir_problem(made)[0] is None and stat.S_IMODE(made.stat().st_mode) == 0o700
    (tmp_path / "file").write_text("x")
    (tmp_path / "link").symlink_to(made)
    assert safeio.private_dir_problem(tmp_path / "file")[0] == safeio.NOT_A_DIRECTORY
    assert safeio.private_dir_problem(tmp_path / "link")[0] == safeio.NOT_A_DIRECTORY  # never followed
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert safeio.private_dir_problem(shared, narrow=True)[0] == safeio.OPEN_TO_OTHERS  # refused, not narrowed
    assert stat.S_IMODE(shared.stat().st_mode) == 0o777
    readable = tmp_path / "readable"
    readable.mkdir()
    readable.chmod(0o755)
    assert safeio.private_dir_problem(readable)[0] is None and stat.S_IMODE(readable.stat().st_mode) == 0o755
    assert safeio.private_dir_problem(readable, narrow=True)[0] is None
    assert stat.S_IMODE(readable.stat().st_mode) == 0o700
    assert not safeio.private_dir(tmp_path / "file") and safeio.private_dir(made)
    with pytest.raises(OSError):
        safeio.private_dir_problem(tmp_path / "missing" / "x", parents=False)
