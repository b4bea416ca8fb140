"""The example job inside a real podman container on the local Slurm cluster (Debian 12's podman 4.3 with crun):
the same directory image as the Charliecloud test (container_image.py; cached), run as the container's root
filesystem (`container.image: DIR:O` -> `podman run --rootfs DIR:O`, an overlay: the cached directory stays as
it was).

The batch shell stays on the host; each node's `podman run` starts catatonit (`--init`) as PID 1, which starts
`ddpctl launch`, torchrun and the 4 workers in the image. The job is preempted (`ddpctl preempt`): the stop
signal that `scancel --signal` sends to the step's task (podman) is proxied into the container (`--sig-proxy`)
and forwarded by PID 1 to the launcher. The job agrees on a stop step, is requeued and resumes exactly: its
final weights equal the uninterrupted reference run (local backend, host Python). `--cgroups=disabled` keeps
every container process in the Slurm step's own cgroups.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shlex
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from clitools import REPO, Cli
from container_image import ensure_image
from test_preemption import (
    TOTAL,
    LogFollower,
    Reference,
    assert_same_training,
    assert_stop_agreed,
    decisions,
    submit,
)

from ddpctl.pyargv import python_module

pytestmark = pytest.mark.slurm

# Prepended (after the __future__ import) to a copy of the example trainer: each rank records where it runs.
WHERE = """
import json as _j, os as _o, sys as _s
import ddpctl as _d, torch as _t
_name = f"where-{_o.environ['DDPCTL_ATTEMPT']}-{_o.environ['RANK']}.json"
with open(_o.path.join(_o.environ["DDPCTL_RUN_DIR"], _name), "w") as _f:
    _j.dump({"python": _s.executable, "version": _s.version.split()[0], "ddpctl": _d.__file__,
             "torch": _t.__file__, "containerenv": _o.path.exists("/run/.containerenv"),
             "init": open("/proc/1/cmdline").read(),
             "cgroup": open("/proc/self/cgroup").read()}, _f)
"""
CAP_SYS_RESOURCE = 24  # capabilities(7)


def require(*programs: str) -> None:
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        message = f"{' '.join(missing)} not installed (apt-get install podman crun catatonit debootstrap)"
        if os.environ.get("DDPCTL_REQUIRE_SLURM") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="module")
def image() -> Path:
    require("podman", "crun", "catatonit", "debootstrap")
    path, timings = ensure_image()
    print(f"container image {path}: base {timings['base']:.1f} s, ddpctl layer {timings['ddpctl']:.1f} s")
    return path


def limit_options() -> list[str]:
    """podman sets the container's open-files and process limits (defaults above ours); raising a limit needs
    CAP_SYS_RESOURCE, which root lacks on some CI machines (crun: "setrlimit `RLIMIT_NOFILE`: Operation not
    permitted"). There, ask for what we already have (nofile) or less (nproc: root is exempt from it anyway)."""
    status = Path("/proc/self/status").read_text()
    effective = int(re.search(r"^CapEff:\s*([0-9a-f]+)$", status, re.M).group(1), 16)  # type: ignore[union-attr]
    if effective >> CAP_SYS_RESOURCE & 1:
        return []
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return ["--ulimit", f"nofile={soft}:{hard}", "--ulimit", "nproc=4096:4096"]


def trainer_copy(tmp_path: Path) -> Path:
    """The example job's directory, its trainer recording where each rank ran."""
    copy = tmp_path / "example"
    shutil.copytree(REPO / "jobs" / "example", copy)
    train = copy / "train.py"
    text = train.read_text()
    head = "from __future__ import annotations\n"
    assert head in text
    train.write_text(text.replace(head, head + WHERE, 1))
    return train


# On the second pair (debug2): one preemption, mostly waiting, beside the first pair's lane.
@pytest.mark.second_pair
def test_example_preempted_and_resumed_inside_podman(
    tmp_path: Path, cleanup_jobs: Callable[[str], str], reference: Reference, image: Path
) -> None:
    if os.environ.get("DDPCTL_TEST_SLURM") == "24.11":
        # The 24.11 cluster's jobs run chrooted into its Debian 13 root (tests/cluster/README.md), which has no
        # podman; 22.05 runs this test.
        pytest.skip("the 24.11 test cluster's job root (Debian 13) has no podman")
    cli = Cli(tmp_path / "home")
    train = trainer_copy(tmp_path)
    options = json.dumps(limit_options())
    sets = (
        f"script={train}",
        "partition=debug2",
        "container.runtime=podman",
        f"container.image={image}:O",
        f"container.options={options}",
    )
    dry = cli.run(
        "submit", str(REPO / "jobs" / "example.yaml"), *[a for s in sets for a in ("--set", s)], "--dry-run"
    ).stdout
    runs = re.search(r"each attempt runs (\S+)", dry)
    assert runs is not None, dry
    copy_dir = Path(runs.group(1)).parent
    assert "podman run --rm --init --sig-proxy=true --cgroups=disabled --network=host --ipc=host" in dry, dry
    assert f"--volume {copy_dir}:{copy_dir} --workdir {copy_dir}" in dry, dry
    assert f"--rootfs {image}:O {shlex.join(python_module('python3', 'ddpctl'))} launch" in dry, dry
    job = submit(cli, tmp_path / "runs", cleanup_jobs, "--ckpt-every", "4", "--sleep-per-step", "0.5", sets=sets)
    follower = LogFollower(cli, job.job_id)
    try:
        job.wait_step(0, 3)
        cli.run("preempt", job.job_id)
        job.wait_requeued(0)
        status = job.wait_terminal()
        code = follower.finish()
    finally:
        follower.kill()

    step = assert_stop_agreed(job, 0)
    assert decisions(job) == [("requeue", "preemption"), ("finish", None)], job.dump()
    assert job.resumed_from(1) == step, job.dump()
    assert job.steps(0) == list(range(1, step + 1)) and job.steps(1) == list(range(step + 1, TOTAL + 1)), job.dump()
    assert_same_training(job, reference, status)
    # The stop signal (scancel --signal to the step's tasks, i.e. podman) reached both in-container launchers
    # through podman's proxy and PID 1; each launcher started torchrun with the image's interpreter.
    got = sorted((e["node"], e["signal"]) for e in job.events("stop-signal") if e.get("attempt") == 0)
    launched = sorted({e["node"] for e in job.events("launch") if e.get("attempt") == 0})
    assert len(launched) == 2 and got == [(node, "SIGUSR2") for node in launched], job.dump()
    assert {e["argv"][0] for e in job.events("launch")} == {"/usr/bin/python3"}, job.dump()
    # Every rank of both attempts ran in a podman container under catatonit, on the image's Python, ddpctl and
    # torch, inside the Slurm step's own cgroup (--cgroups=disabled).
    for attempt in (0, 1):
        for rank in range(4):
            where = json.loads((job.run_dir / f"where-{attempt}-{rank}.json").read_text())
            assert where["containerenv"], where  # podman's marker file in every container
            assert where["init"].split("\0")[0] == "/run/podman-init", where
            assert where["python"] == "/usr/bin/python3" and where["version"].startswith("3.11"), where
            assert where["ddpctl"].startswith("/usr/local/lib/python3.11/dist-packages/ddpctl/"), where
            assert where["torch"].startswith("/usr/local/lib/python3.11/dist-packages/torch/"), where
            assert re.search(rf":freezer:/\S*/job_{job.job_id}/step_\d+$", where["cgroup"], re.M), where
    assert code == 0 and follower.lines[-1] == f"-- job {job.job_id} COMPLETED --", follower.lines[-10:]
    assert not (image / str(tmp_path).lstrip("/")).exists()  # the overlay kept the directory as it was
