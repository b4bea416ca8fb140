"""The example job inside a real container on the local Slurm cluster: Charliecloud (`ch-run`), a directory image
debootstrapped from Debian 12 with torch and this checkout's ddpctl (see container_image.py; cached).

The batch shell stays on the host; each node's `ddpctl launch`, torchrun and the 4 workers run in the image.
The job is preempted (`ddpctl preempt`), agrees on a stop step, is requeued and resumes exactly: its final
weights equal the uninterrupted reference run (local backend, host Python), and `logs -f` follows it throughout.
"""

from __future__ import annotations

import json
import os
import re
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
             "torch": _t.__file__, "ch_running": _o.environ.get("CH_RUNNING")}, _f)
"""


def require(program: str) -> None:
    if shutil.which(program) is None:
        message = f"{program} not installed (apt-get install charliecloud debootstrap)"
        if os.environ.get("DDPCTL_REQUIRE_SLURM") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="module")
def image() -> Path:
    for program in ("ch-run", "debootstrap"):
        require(program)
    path, timings = ensure_image()
    print(f"container image {path}: base {timings['base']:.1f} s, ddpctl layer {timings['ddpctl']:.1f} s")
    return path


def trainer_copy(tmp_path: Path) -> Path:
    """The example job's directory under /tmp (ch-run binds the host's /tmp; a read-only image cannot grow
    mount points elsewhere), its trainer recording where each rank ran."""
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
def test_example_preempted_and_resumed_inside_charliecloud(
    tmp_path: Path, cleanup_jobs: Callable[[str], str], reference: Reference, image: Path
) -> None:
    if os.environ.get("DDPCTL_TEST_SLURM") == "24.11":
        # The 24.11 cluster's jobs run chrooted into its Debian 13 root, and the kernel refuses a chrooted
        # process a user namespace (user_namespaces(7): EPERM): ch-run fails with "can't init user+mount
        # namespaces". A test-cluster limit, not a Slurm one (tests/cluster/README.md); 22.05 runs this test.
        pytest.skip("Charliecloud needs user namespaces, which the 24.11 test cluster's chrooted jobs cannot create")
    cli = Cli(tmp_path / "home", extra_env={"USER": os.environ.get("USER", "root")})
    train = trainer_copy(tmp_path)
    sets = (f"script={train}", "partition=debug2", "container.runtime=charliecloud", f"container.image={image}")
    dry = cli.run(
        "submit", str(REPO / "jobs" / "example.yaml"), *[a for s in sets for a in ("--set", s)], "--dry-run"
    ).stdout
    # Every attempt runs the run's own copy of the code (code/ in its run dir), bound into the image and the
    # launcher's working directory, as the trainer's directory was before the copy existed.
    runs = re.search(r"each attempt runs (\S+)", dry)
    assert runs is not None, dry
    pinned = Path(runs.group(1))
    assert pinned.name == train.name and pinned.parent.name == "code" and "JOBID" in pinned.parts, dry
    copy_dir = pinned.parent
    ddpctl_words = shlex.join(python_module("python3", "ddpctl"))  # the cwd (a clone named ddpctl/) left off
    assert f"--bind {copy_dir}:{copy_dir} --cd {copy_dir} {image} -- {ddpctl_words} launch" in dry, dry
    assert f"--no-python {shlex.join(python_module('python3', 'ddpctl.node.worker'))}" in dry, dry
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
    # The stop signal (scancel --signal to the step's tasks) reached both in-container launchers through ch-run,
    # besides the stop files; each launcher started torchrun with the image's interpreter.
    got = sorted((e["node"], e["signal"]) for e in job.events("stop-signal") if e.get("attempt") == 0)
    launched = sorted({e["node"] for e in job.events("launch") if e.get("attempt") == 0})
    assert len(launched) == 2 and got == [(node, "SIGUSR2") for node in launched], job.dump()
    assert {e["argv"][0] for e in job.events("launch")} == {"/usr/bin/python3"}, job.dump()
    # Every rank of both attempts ran on the image's Python with the image's ddpctl and torch.
    for attempt in (0, 1):
        for rank in range(4):
            where = json.loads((job.run_dir / f"where-{attempt}-{rank}.json").read_text())
            assert where["ch_running"], where
            assert where["python"] == "/usr/bin/python3" and where["version"].startswith("3.11"), where
            assert where["ddpctl"].startswith("/usr/local/lib/python3.11/dist-packages/ddpctl/"), where
            assert where["torch"].startswith("/usr/local/lib/python3.11/dist-packages/torch/"), where
    assert code == 0 and follower.lines[-1] == f"-- job {job.job_id} COMPLETED --", follower.lines[-10:]


def test_doctor_runs_ddpctl_in_the_image(image: Path, tmp_path: Path) -> None:
    """`doctor` runs `python3 -m ddpctl --version` in the image: ok in the test image, a clear failure in its
    base layer (Debian + torch, no ddpctl)."""
    cli = Cli(tmp_path / "home")
    base = next(image.parent.glob("base-*"))
    lines = {}
    for name, img in (("good", image), ("base", base)):
        done = cli.run(
            "doctor",
            str(REPO / "jobs" / "example.yaml"),
            "--set",
            "container.runtime=charliecloud",
            "--set",
            f"container.image={img}",
            check=False,
        )
        lines[name] = next(line for line in done.stdout.splitlines() if "container:" in line)
    assert lines["good"].startswith("[ok  ] container: charliecloud image"), lines
    assert "ddpctl 0.1.0 (python3)" in lines["good"], lines
    assert lines["base"].startswith("[FAIL] container:") and "No module named ddpctl" in lines["base"], lines
    assert "the image must contain python3 with torch and ddpctl" in lines["base"]
