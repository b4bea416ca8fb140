"""ddpctl's remote commands over a warm connection against the same commands run with plain `ssh DEST ddpctl`.

Starts a real sshd on loopback (as tests/remote/test_remote_sshd.py does: its own host and user keys, an ssh
config of its own; needs root and Debian's openssh-server), whose "remote" ddpctl is this checkout's with a
registry of its own. Then, alternately:

- `ddpctl status --cluster login JOB` against `ssh login <remote ddpctl> status JOB`, plain ssh both without
  multiplexing (a fresh login each time, as a user types it) and over the same warm shared connection;
- an unchanged `ddpctl submit jobs/job.yaml --cluster login` (the code already there: nothing sent) against
  `ssh login <remote ddpctl> submit <the same spec in a copy of the code there>` (the code copied beforehand,
  as with rsync), both on the local backend (a script that exits at once);
- `ddpctl list` (the remote jobs of the cluster and a local one, their states asked with one remote
  `list --json`) against `ssh login <remote ddpctl> list --json` with a fresh login; and `ddpctl status JOB`
  (a remote job found in the registry here, no --cluster) against `status --cluster login JOB`.

    python benchmarks/bench_remote.py [--rounds 7] [--only status|submit|list]

Targets (issue 30): ratio ≤ 1.0 against plain ssh, and `status` ≤ 0.3 s on loopback.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from _timing import alternate, report  # noqa: E402
from sshdtools import SSHD, Login  # noqa: E402  (the tests' sshd: one way to start it)

from ddpctl.run.registry import JobRecord, Registry  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--only", choices=("status", "submit", "list"), help="measure this pair only")
    args = parser.parse_args()
    if os.geteuid() != 0 or not SSHD.exists():
        raise SystemExit("bench_remote needs root and /usr/sbin/sshd (tests/cluster/start.sh --packages)")
    home, sockets = Path(tempfile.mkdtemp(prefix="bench-remote-")), Path(tempfile.mkdtemp(prefix="ctl-"))
    login = Login(home, sockets)
    try:
        login.start()
        measure(login, args.rounds, args.only)
    finally:
        login.stop()
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(sockets, ignore_errors=True)


def measure(login: Login, rounds: int, only: str | None) -> None:
    home = login.home
    code = home / "project"
    (code / "jobs").mkdir(parents=True)
    (code / "train.py").write_text("pass\n")
    (code / "jobs" / "job.yaml").write_text("name: bench\nscript: ../train.py\nbackend: local\n")
    (home / "work").mkdir()
    (home / "clusters.yaml").write_text(f"login:\n  ssh: login\n  ddpctl: {login.remote}\n  workdir: {home}/work\n")
    copy = home / "work" / "copy"
    shutil.copytree(code, copy)  # the baseline's code, copied there beforehand
    env = login.env()
    ddpctl = [sys.executable, "-m", "ddpctl"]
    first = login.cli(str(code / "jobs" / "job.yaml"), "--cluster", "login", command="submit")
    if first.returncode != 0:
        raise SystemExit(f"submit --cluster failed: {first.stderr}")
    job = first.stdout.split(": job ", 1)[1].split()[0]
    ssh = ["ssh", "-F", str(home / "ssh_config"), "-T", "login"]
    mux = ["ssh", "-F", str(home / "ssh_config"), "-o", f"ControlPath={login.sockets}/ctl/%C", "-T", "login"]
    remote = " ".join(login.remote)

    ours = [*ddpctl, "status", "--cluster", "login", job]
    if only in (None, "status"):
        ours_t, plain_t = alternate(ours, [*ssh, f"{remote} status {job}"], rounds, env=env)
        report("ddpctl status --cluster (warm)", ours_t, "ssh login ddpctl status", plain_t, "<= 1.0, and <= 0.3 s")
        ours_t, mux_t = alternate(ours, [*mux, f"{remote} status {job}"], rounds, env=env)
        report("ddpctl status --cluster (warm)", ours_t, "ssh (same warm connection) ddpctl status", mux_t, "~1.0")
    if only in (None, "list"):
        Registry(home / "laptop-home").add(JobRecord("local-9", "near", str(home / "near"), "local", time.time()))
        listed = [*ddpctl, "list"]
        ours_t, plain_t = alternate(listed, [*ssh, f"{remote} list --json"], rounds, env=env)
        report(
            "ddpctl list, a remote and a local job (warm)", ours_t, "ssh login ddpctl list --json", plain_t, "<= 1.0"
        )
        found = [*ddpctl, "status", job]
        ours_t, named_t = alternate(found, ours, rounds, env=env)
        report("ddpctl status JOB (found here, warm)", ours_t, "ddpctl status --cluster login JOB", named_t, "~1.0")
    if only not in (None, "submit"):
        return
    submit = [*ddpctl, "submit", str(code / "jobs" / "job.yaml"), "--cluster", "login", "--allow-duplicate"]
    baseline = f"cd {home}/work && {remote} submit {copy}/jobs/job.yaml --allow-duplicate"
    label = "ddpctl submit --cluster, unchanged (warm)"
    ours_t, plain_t = alternate(submit, [*ssh, baseline], rounds, env=env)
    report(label, ours_t, "ssh login ddpctl submit", plain_t, "<= 1.0")
    ours_t, mux_t = alternate(submit, [*mux, baseline], rounds, env=env)
    report(label, ours_t, "ssh (same warm connection) ddpctl submit", mux_t, "~1.0")


if __name__ == "__main__":
    main()
