"""Shared pytest plumbing: the local Slurm cluster fixture and job cleanup.

Tests marked ``slurm`` (``pytestmark = pytest.mark.slurm``) get ``slurm_cluster`` automatically: the first
such test runs tests/cluster/start.sh (idempotent, fast when the cluster is up). Where the cluster cannot run
(not root, no Slurm and no apt-get, start.sh failing) those tests are skipped with the reason, unless
DDPCTL_REQUIRE_SLURM=1 (CI), where they fail instead. The Slurm version is DDPCTL_TEST_SLURM (22.05 or 24.11),
else the one start.sh last started (tests/cluster/README.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from slurmtools import START_SCRIPT, STATE_DIR, ClusterInfo, scancel_and_wait, use_slurm_version

# The Slurm version this session tests (DDPCTL_TEST_SLURM, else the running one): set before any test runs a
# Slurm command, so sbatch/squeue/... on PATH are that version's clients (24.11's are wrappers, slurm2411.sh).
SLURM_VERSION = use_slurm_version(os.environ)

# Between the lanes of cluster tests (`_cluster_lane`): on the machine, not in a test's tmp dir, so every worker
# sees the same file.
LANES_LOCK = STATE_DIR / "test-lanes.lock"

START_TIMEOUT_S = 600  # covers apt-get on a fresh machine; an installed machine takes well under a second


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("DDPCTL_REQUIRE_SLURM") == "1":
        pytest.fail(f"DDPCTL_REQUIRE_SLURM=1 but the local Slurm cluster is unavailable: {reason}", pytrace=False)
    pytest.skip(f"local Slurm cluster unavailable: {reason}")


def _sinfo_column(fmt: str) -> list[str]:
    res = subprocess.run(["sinfo", "-h", "-o", fmt], capture_output=True, text=True, timeout=30, check=False)
    return res.stdout.split()


def _start_cluster() -> ClusterInfo:
    if os.geteuid() != 0:
        _unavailable("tests/cluster/start.sh must run as root")
    if shutil.which("slurmctld") is None and shutil.which("apt-get") is None:
        _unavailable("Slurm is not installed and there is no apt-get to install it")
    try:
        res = subprocess.run(
            ["bash", str(START_SCRIPT)], capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        _unavailable(f"{START_SCRIPT} did not finish in {START_TIMEOUT_S} s")
    if res.returncode != 0:
        _unavailable(f"{START_SCRIPT} exited {res.returncode}:\n{res.stdout}{res.stderr[-4000:]}")
    partitions = _sinfo_column("%P")
    default = next((p.rstrip("*") for p in partitions if p.endswith("*")), "")
    return ClusterInfo(
        nodes=tuple(_node_names()),
        partitions=tuple(p.rstrip("*") for p in partitions),
        default_partition=default,
        state_dir=STATE_DIR,
    )


def _node_names() -> list[str]:
    res = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, timeout=30, check=False)
    return sorted(set(res.stdout.split()), key=lambda n: (len(n), n))


# tryfirst: xdist's own hook turns the xdist_group marks into the `@group` node-id suffix its scheduler reads, so
# the marks must be on before it runs (without this the cluster tests ran in both workers at once).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`-n 2 --dist loadgroup`, the README's test command) the tests that use the cluster run in
    two lanes: those marked ``second_pair`` one after another in one worker, on the last two nodes' partitions, and
    all others one after another in another worker (they share the first two nodes' partitions, the controller
    and the faults some of them inject), while the tests that do not use the cluster fill the workers' gaps. Most
    cluster tests wait on the scheduler or on a paced step, not the CPU. ``cluster_alone`` tests go last, so the
    second pair's lane is done before them (`_cluster_lane` keeps them apart when it is not); tests/cluster/README.md
    says which tests must run alone."""
    items[:] = [i for i in items if not _alone(i)] + [i for i in items if _alone(i)]
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        if item.get_closest_marker("slurm") is not None:
            lane = "slurm-pair2" if item.get_closest_marker("second_pair") else "slurm-cluster"
            item.add_marker(pytest.mark.xdist_group(lane))


def _alone(item: pytest.Item) -> bool:
    return item.get_closest_marker("cluster_alone") is not None


@pytest.fixture(scope="session")
def slurm_cluster() -> ClusterInfo:
    """The running local cluster: node names (node1, node2, ...), partitions (debug default, urgent)."""
    return _start_cluster()


@pytest.fixture(autouse=True)
def _slurm_marker(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("slurm") is None:
        yield
        return
    with _cluster_lane(request.node):
        request.getfixturevalue("slurm_cluster")
        yield


@contextlib.contextmanager
def _cluster_lane(item: pytest.Item) -> Iterator[None]:
    """A second-pair test holds the lanes' lock shared for its whole run (fixtures included), a ``cluster_alone``
    test holds it exclusively: so one never overlaps the other, whichever worker runs them. Tests of the first
    lane take nothing: their own worker runs them one at a time, and they leave the second pair's nodes alone."""
    if item.get_closest_marker("second_pair"):
        mode = fcntl.LOCK_SH
    elif _alone(item):
        mode = fcntl.LOCK_EX
    else:
        yield
        return
    LANES_LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LANES_LOCK.open("a") as lock:
        fcntl.flock(lock, mode)  # released when the file closes
        yield


@pytest.fixture
def cleanup_jobs() -> Iterator[Callable[[str], str]]:
    """Register job ids (``cleanup_jobs(job_id)``, returns the id); they are scancel'ed at teardown and
    waited for until squeue no longer lists them, so the next test starts with free nodes."""
    ids: list[str] = []

    def register(job_id: str) -> str:
        ids.append(job_id)
        return job_id

    yield register
    scancel_and_wait(ids)


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The example job's uninterrupted run (tests/integration/test_preemption.py's TRAIN) on the local backend,
    for every module that compares a preempted run's weights with it (preemption, chains, containers, the login
    node): one run per test command rather than one per module, since each costs ~30 s of CPU on CI's 2 cores
    (tests/cluster/README.md). Under xdist the first worker that needs it starts it and the others read it.
    """
    from clitools import Cli

    integration = str(Path(__file__).parent / "integration")
    if integration not in sys.path:  # where pytest puts it once it collects a test there (tests/remote's need it too)
        sys.path.insert(0, integration)
    from test_preemption import Job, Reference, submit

    # Every worker's basetemp is a directory of the run's own one (pytest-xdist), which they all see.
    shared = tmp_path_factory.getbasetemp().parent if os.environ.get("PYTEST_XDIST_WORKER") else None
    with _reference_record(shared) as record:
        started = not record.exists()
        if started:
            tmp = tmp_path_factory.mktemp("reference")
            job = submit(Cli(tmp / "home"), tmp / "runs", lambda job_id: job_id, backend="local")
            safe_write = record.with_name(record.name + ".partial")
            safe_write.write_text(json.dumps([str(tmp / "home"), job.job_id, str(job.run_dir)]))
            safe_write.replace(record)
        home, job_id, run_dir = json.loads(record.read_text())
    job = Job(Cli(Path(home)), job_id, Path(run_dir))
    try:
        yield Reference(job)
    finally:
        if started:  # another worker may still want it: let it finish, and leave nothing running
            _finish_or_cancel(job.cli, job_id)


@contextlib.contextmanager
def _reference_record(shared: Path | None) -> Iterator[Path]:
    if shared is None:  # one process: its own record, in a directory nothing else uses
        with tempfile.TemporaryDirectory() as private:
            yield Path(private) / "reference.json"
        return
    with (shared / "reference.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield shared / "reference.json"


def _finish_or_cancel(cli: Any, job_id: str) -> None:
    from clitools import TERMINAL

    if cli.status(job_id)["state"] in TERMINAL:
        return
    try:
        cli.wait_terminal(job_id, timeout=300)
    except AssertionError:
        cli.run("cancel", job_id, check=False)
