"""What the code snapshot costs at submit, for a git repository of 5,000 files / 200 MB (issues 13 and 28).

Measures `ddpctl.snapshot.take` (what `ddpctl submit` runs before the job exists) on a generated, committed
repository: the first submit (empty store: every file hashed and stored once, then the run's copy written), an
unchanged second submit (target < 1 s: git's index says nothing changed, every content is found in the store by
id and nothing is read into it; the run's own copy is still written, by reflink where the filesystem has them,
else by copy_file_range), a submit after editing one file (only that file is stored), and a dirty tree of 50
edited files. Baselines, side by side and alternated with the unchanged submit: `cp -r` of the work tree, and
copying the tracked files as a naive snapshot would (`git archive HEAD | tar -x`).

    python benchmarks/bench_snapshot.py [--files 5000] [--mb 200] [--rounds 7] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ddpctl.snapshot import take
from ddpctl.snapshot.collect import Limits
from ddpctl.spec import JobSpec

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@b",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@b",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, env=GIT_ENV, capture_output=True)


def make_repo(root: Path, files: int, megabytes: int) -> None:
    """`files` files in 50 directories: 1 % large ones carry 90 % of the bytes, the rest is source-sized."""
    large = max(1, files // 100)
    big_size = megabytes * 1024 * 1024 * 9 // 10 // large
    small_size = megabytes * 1024 * 1024 // 10 // (files - large)
    (root / "train.py").write_text("print('train')\n")
    for index in range(files - 1):
        path = root / f"pkg{index % 50:02d}" / f"f{index:05d}.{'bin' if index < large else 'py'}"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(os.urandom(big_size if index < large else small_size))
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "bench")


def timed(spec: JobSpec, record: Path) -> tuple[float, int]:
    """One submit's snapshot, as `ddpctl submit` takes it: into a fresh (staging) run dir of its own."""
    record.mkdir()
    start = time.perf_counter()
    info = take(spec, record / "snapshot.json", record / "code", Limits(max_files=100_000, max_bytes=1 << 40))
    elapsed = time.perf_counter() - start
    assert info is not None
    return elapsed, info.new_bytes


def naive_copy(repo: Path, target: Path) -> float:
    start = time.perf_counter()
    target.mkdir()
    archive = subprocess.Popen(["git", "-C", str(repo), "archive", "HEAD"], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(target)], stdin=archive.stdout, check=True)
    archive.wait()
    elapsed = time.perf_counter() - start
    shutil.rmtree(target)
    return elapsed


def cp_r(repo: Path, target: Path) -> float:
    start = time.perf_counter()
    subprocess.run(["cp", "-r", str(repo), str(target)], check=True)
    elapsed = time.perf_counter() - start
    shutil.rmtree(target)
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="ddpctl-bench-snapshot-"))
    try:
        repo, runs = scratch / "repo", scratch / "runs"
        repo.mkdir()
        t0 = time.perf_counter()
        make_repo(repo, args.files, args.mb)
        print(
            f"repository: {args.files} files, {args.mb} MB, committed in {time.perf_counter() - t0:.1f} s; "
            f"load average {os.getloadavg()[0]:.2f}"
        )
        spec = JobSpec(name="bench", script=str(repo / "train.py"), run_dir=str(runs))
        first, copied = timed(spec, scratch / "first")
        print(f"first submit (empty store):     {first * 1000:8.1f} ms, {copied / 2**20:.1f} MB stored")
        times: dict[str, list[float]] = {"ours": [], "cp": [], "archive": []}
        for index in range(args.rounds):
            names = ["ours", "cp", "archive"]
            for name in names[index % 3 :] + names[: index % 3]:  # each goes first in turn
                if name == "ours":
                    elapsed, new = timed(spec, scratch / f"again-{index}")
                    assert new == 0, f"an unchanged submit stored {new} bytes"
                elif name == "cp":
                    elapsed = cp_r(repo, scratch / f"cp-{index}")
                else:
                    elapsed = naive_copy(repo, scratch / f"copy-{index}")
                times[name].append(elapsed)
            shutil.rmtree(scratch / f"again-{index}")  # a finished run's dir: keeps the disk use flat
        med = {name: statistics.median(values) for name, values in times.items()}
        print(
            f"unchanged second submit:        {med['ours'] * 1000:8.1f} ms median of {args.rounds}, 0 bytes stored, "
            "the run's copy written (target < 1000 ms)"
        )
        print(f"cp -r of the work tree:         {med['cp'] * 1000:8.1f} ms median of {args.rounds}")
        print(f"git archive HEAD | tar -x:      {med['archive'] * 1000:8.1f} ms median of {args.rounds}")
        print(f"ratio unchanged submit / cp -r = {med['ours'] / med['cp']:.3f}")
        print(f"ratio unchanged submit / git archive | tar -x = {med['ours'] / med['archive']:.3f}")
        edited = next(repo.glob("pkg01/*.py"))
        edited.write_bytes(edited.read_bytes() + b"# edited\n")
        one, copied = timed(spec, scratch / "one")
        print(f"one file edited (dirty):        {one * 1000:8.1f} ms, {copied / 2**10:.1f} KiB stored")
        for path in sorted(repo.glob("pkg02/*.py"))[:50]:
            path.write_bytes(path.read_bytes() + b"# edited\n")
        fifty, copied = timed(spec, scratch / "fifty")
        print(f"50 files edited (dirty):        {fifty * 1000:8.1f} ms, {copied / 2**10:.1f} KiB stored")
    finally:
        if args.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
