"""doctor's GPU, network, tracker and core lines: literal facts in, lines out (ddpctl.plan.gpucheck), and the
probe's answer read back (ddpctl.plan.torchprobe.parse)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ddpctl.plan import gpucheck
from ddpctl.plan.clusterfacts import FAIL, OK, WARN
from ddpctl.plan.doctor import Facts, evaluate
from ddpctl.plan.torchprobe import TorchFacts, parse
from ddpctl.spec import JobSpec

PY = "/env/bin/python"
CPU = TorchFacts(PY, version="2.13.0+cpu")
CUDA1 = TorchFacts(PY, version="2.11.0+cu130", cuda="13.0", nccl="2.28.9", gpus=1)
CUDA8 = replace(CUDA1, gpus=8)
NO_GPU_SEEN = replace(CUDA1, gpus=0)
NO_TORCH = TorchFacts(PY, error="ModuleNotFoundError: No module named 'torch'")
SILENT = TorchFacts(PY, answered=False, error="/env/bin/python did not answer within 60 s")
SLURM = JobSpec(name="x", script="t.py", nodes=2, nproc_per_node=4, gpus_per_node=4, partition="gpu")
LOCAL1 = JobSpec(name="x", script="t.py", nodes=1, nproc_per_node=1, gpus_per_node=1, backend="local")
LOCAL_CPU = JobSpec(name="x", script="t.py", nodes=2, nproc_per_node=2, backend="local")


@pytest.mark.parametrize(
    ("spec", "torch", "status", "detail"),
    [
        (SLURM, CUDA1, OK, f"torch 2.11.0+cu130 (CUDA 13.0, NCCL 2.28.9, 1 GPU(s) visible here) in {PY}"),
        (LOCAL_CPU, CPU, OK, f"torch 2.13.0+cpu (CPU-only: no CUDA, no NCCL) in {PY}"),
        (LOCAL_CPU, NO_TORCH, FAIL, f"not importable by {PY} (ModuleNotFoundError: No module named 'torch'): the"),
        (LOCAL_CPU, SILENT, WARN, "not checked: /env/bin/python did not answer within 60 s"),
    ],
)
def test_torch_line(spec: JobSpec, torch: TorchFacts, status: str, detail: str) -> None:
    got, name, said = gpucheck.torch_line(spec, torch)
    assert (got, name) == (status, "torch") and said.startswith(detail), said


@pytest.mark.parametrize(
    ("spec", "torch", "status", "fragment"),
    [
        (SLURM, CPU, FAIL, "a CPU-only torch cannot use the GPUs this spec asks for (gpus_per_node: 4;"),
        (LOCAL1, CPU, FAIL, "a CPU-only torch cannot use the GPUs this spec asks for (gpus_per_node: 1;"),
        (SLURM, CUDA1, OK, "gpus_per_node 4 from Slurm's GRES"),  # a login node's own GPUs do not count
        (SLURM, NO_GPU_SEEN, OK, "gpus_per_node 4 from Slurm's GRES"),
        (LOCAL1, CUDA1, OK, "1 GPU(s) visible here for nproc_per_node 1"),
        (LOCAL1, NO_GPU_SEEN, WARN, "nproc_per_node 1 exceeds the 0 GPU(s) this machine shows"),
        (replace(LOCAL1, nproc_per_node=4, gpus_per_node=4), CUDA1, WARN, "nproc_per_node 4 exceeds the 1 GPU(s)"),
        (replace(LOCAL1, nodes=2), CUDA8, FAIL, "2 simulated nodes share this machine's 8 GPU(s)"),
        (LOCAL_CPU, CPU, OK, "none asked (gpus_per_node: 0)"),
        (LOCAL_CPU, CUDA8, WARN, "gpus_per_node is 0, but the workers see 8 GPU(s) here"),
        (replace(SLURM, gpus_per_node=0, nproc_per_node=1), CUDA8, OK, "none asked"),
        (LOCAL1, NO_TORCH, OK, "not checked against a torch here"),
    ],
)
def test_gpus_line(spec: JobSpec, torch: TorchFacts, status: str, fragment: str) -> None:
    got, name, detail = gpucheck.gpus_line(spec, torch)
    assert (got, name) == (status, "gpus") and fragment in detail, detail


@pytest.mark.parametrize(
    ("spec", "torch", "env_ifname", "line"),
    [
        (LOCAL1, CUDA1, None, (OK, "network", "local backend: NCCL on lo (127.0.0.1)")),
        (LOCAL1, None, None, (OK, "network", "local backend: NCCL on lo (127.0.0.1)")),  # the spec asks for GPUs
        (LOCAL_CPU, CPU, None, (OK, "network", "local backend: Gloo on lo (127.0.0.1)")),
        (LOCAL_CPU, CUDA1, None, (OK, "network", "local backend: NCCL on lo (127.0.0.1)")),  # the runtime's choice
        (LOCAL_CPU, CPU, ("ib0", "the spec's env"), (OK, "network", "local backend: Gloo on lo (127.0.0.1)")),
        (SLURM, CUDA1, None, None),  # the host's own line (doctor.check_network)
        (
            SLURM,
            CUDA1,
            ("ib0", "the spec's env"),
            (
                WARN,
                "network",
                "NCCL_SOCKET_IFNAME=ib0 in the spec's env is replaced on each node by the interface ddpctl picks"
                " there; nccl.socket_ifname: ib0 keeps it",
            ),
        ),
        (replace(SLURM, nccl=replace(SLURM.nccl, socket_ifname="ib0")), CUDA1, ("ib0", "the spec's env"), None),
    ],
)
def test_network_line(
    spec: JobSpec, torch: TorchFacts | None, env_ifname: tuple[str, str] | None, line: object
) -> None:
    assert gpucheck.network_line(spec, torch, env_ifname) == line


FACTS = Facts(tools={}, hostname="login1", host_address="10.0.0.5", ifname="eth0", torch=CUDA1)


@pytest.mark.parametrize(
    ("spec", "facts", "status", "detail"),
    [
        (SLURM, FACTS, OK, "NCCL over the interface each node's name resolves to; here login1 → 10.0.0.5"),
        (replace(SLURM, gpus_per_node=0, nproc_per_node=1), FACTS, OK, "Gloo over the interface each node's"),
        (replace(SLURM, nccl=replace(SLURM.nccl, socket_ifname="ib0")), FACTS, OK, "NCCL over ib0"),
        (SLURM, replace(FACTS, host_address="127.0.1.1"), WARN, "NCCL: login1 resolves to loopback 127.0.1.1"),
    ],
)
def test_network_check_names_nccl_or_gloo(spec: JobSpec, facts: Facts, status: str, detail: str) -> None:
    found = {check.name: check for check in evaluate(spec, facts)}["network"]
    assert found.status == status and found.detail.startswith(detail), found


@pytest.mark.parametrize(
    ("tracking", "torch", "status", "fragment"),
    [
        ((), CPU, OK, "none"),
        (("wandb", "mlflow"), CPU, OK, f"wandb, mlflow importable by {PY}"),
        (("wandb", "mlflow"), replace(CPU, missing=("mlflow",)), FAIL, "tracking: mlflow not installed for"),
        (("wandb",), replace(CPU, missing=("wandb",)), FAIL, "pip install wandb there, or drop it from tracking"),
        (("tensorboard",), SILENT, OK, "not checked here"),
    ],
)
def test_trackers_line(tracking: tuple[str, ...], torch: TorchFacts, status: str, fragment: str) -> None:
    got, name, detail = gpucheck.trackers_line(replace(LOCAL_CPU, tracking=tracking), torch)
    assert (got, name) == (status, "trackers") and fragment in detail, detail


@pytest.mark.parametrize(
    ("spec", "cores", "status", "fragment"),
    [
        (LOCAL_CPU, 4, OK, "4 rank(s) on the 4 core(s) of this machine"),
        (LOCAL_CPU, 2, WARN, "over-subscribed, each rank gets 0.5 of a core"),
        (replace(LOCAL_CPU, nodes=4, nproc_per_node=4), 2, WARN, "16 rank(s) on the 2 core(s)"),
        (replace(LOCAL_CPU, nodes=8, nproc_per_node=4), 2, FAIL, "32 rank(s) on the 2 core(s) of this machine"),
        (replace(LOCAL_CPU, nodes=8, nproc_per_node=4), 4, WARN, "over-subscribed"),
        (LOCAL_CPU, None, OK, "the cores of this machine"),
        (replace(SLURM, cpus_per_task=32), 2, OK, "4 rank(s) on the 32 core(s) of each node's task"),
        (replace(SLURM, cpus_per_task=2), 64, WARN, "4 rank(s) on the 2 core(s) of each node's task"),
        (SLURM, 2, OK, "4 rank(s) per node share the CPUs Slurm gives the node's task"),
    ],
)
def test_cores_line(spec: JobSpec, cores: int | None, status: str, fragment: str) -> None:
    got, name, detail = gpucheck.cores_line(spec, cores)
    assert (got, name) == (status, "cores") and fragment in detail, detail


def test_mlflow_missing_where_ddpctl_submits_is_refused() -> None:
    spec = replace(LOCAL_CPU, tracking=("mlflow",))
    facts = Facts(tools={}, torch=CPU, cores=8, mlflow_here=False)
    (check,) = [c for c in evaluate(spec, facts) if c.name == "trackers"]
    assert check.status == FAIL and "mlflow is not installed where ddpctl submits" in check.detail, check


def test_local_backend_shows_no_slurm_warnings() -> None:
    spec = replace(LOCAL_CPU, requeue=replace(LOCAL_CPU.requeue, lead_s=20))
    checks = {check.name: check for check in evaluate(spec, Facts(tools={}, torch=CPU, cores=8))}
    assert checks["slurm tools"].detail == "local backend: not needed" and checks["slurm tools"].status == OK
    assert checks["requeue"].status == OK and "Slurm" not in checks["requeue"].detail
    assert checks["files"].detail == f"{spec.run_dir} writable"  # the local backend has no batch script
    assert not [c for c in checks.values() if c.status != OK], checks


@pytest.mark.parametrize(
    ("returncode", "stdout", "stderr", "facts"),
    [
        (
            0,
            '{"missing": ["wandb"], "version": "2.11.0+cu130", "cuda": "13.0", "gpus": 2, "nccl": "2.28.9"}\n',
            "",
            TorchFacts(PY, version="2.11.0+cu130", cuda="13.0", nccl="2.28.9", gpus=2, missing=("wandb",)),
        ),
        (
            0,
            "a warning a site's sitecustomize printed\n"
            '{"missing": [], "error": "ModuleNotFoundError: No module named \'torch\'"}\n',
            "",
            NO_TORCH,
        ),
        (0, '{"missing": "wandb", "gpus": "2"}', "", TorchFacts(PY)),  # wrong types: nothing believed
        (1, "", "Traceback ...\nSyntaxError: invalid syntax\n", None),
        (0, "x" * 5000, "", None),
        (0, "", "", None),
    ],
)
def test_parse(returncode: int, stdout: str, stderr: str, facts: TorchFacts | None) -> None:
    got = parse(PY, returncode, stdout, stderr)
    if facts is None:
        assert not got.answered and got.error and got.error.startswith(f"{PY} could not run the probe"), got
    else:
        assert got == facts


@pytest.mark.parametrize(
    ("spec", "notes"),
    [
        (
            LOCAL1,
            [
                "# network: NCCL on lo (127.0.0.1), NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME below",
                "# GPUs: local rank r (0..0) of each simulated node uses cuda:r of this machine, whose GPUs every"
                " simulated node shares",
            ],
        ),
        (
            LOCAL_CPU,
            [
                "# network: Gloo on lo (127.0.0.1), NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME below; NCCL instead"
                " where the workers see a GPU (ddpctl.runtime opens NCCL on one)"
            ],
        ),
        (
            SLURM,
            ["# network: NCCL over the interface each node's hostname resolves to, picked on the node (<detected>)"],
        ),
        (
            replace(SLURM, nccl=replace(SLURM.nccl, socket_ifname="ib0")),
            ["# network: NCCL over ib0 (nccl.socket_ifname)"],
        ),
        (
            replace(SLURM, gpus_per_node=0, nproc_per_node=1),
            ["# network: Gloo over the interface each node's hostname resolves to, picked on the node (<detected>)"],
        ),
    ],
)
def test_plan_notes(spec: JobSpec, notes: list[str]) -> None:
    assert gpucheck.plan_notes(spec) == notes


@pytest.mark.parametrize(
    ("spec", "torch", "lines"),
    [
        (LOCAL_CPU, None, []),  # a CPU spec: the dry run probes nothing
        (
            SLURM,
            CPU,
            [
                f"torch:    torch 2.13.0+cpu (CPU-only: no CUDA, no NCCL) in {PY}",
                "gpus:     refused by doctor: a CPU-only torch cannot use the GPUs this spec asks for (gpus_per_node:"
                f" 4; torch 2.13.0+cpu in {PY})",
            ],
        ),
        (SLURM, CUDA1, [f"torch:    torch 2.11.0+cu130 (CUDA 13.0, NCCL 2.28.9, 1 GPU(s) visible here) in {PY}"]),
        (
            replace(LOCAL1, nproc_per_node=2, gpus_per_node=2),
            CUDA1,
            [
                f"torch:    torch 2.11.0+cu130 (CUDA 13.0, NCCL 2.28.9, 1 GPU(s) visible here) in {PY}",
                "gpus:     warning: nproc_per_node 2 exceeds the 1 GPU(s) this machine shows: local rank r uses cuda:r",
            ],
        ),
        (
            LOCAL1,
            NO_TORCH,
            [
                f"torch:    FAIL: not importable by {PY} (ModuleNotFoundError: No module named 'torch'):"
                " the launcher and workers need it"
            ],
        ),
    ],
)
def test_dry_run_lines(spec: JobSpec, torch: TorchFacts | None, lines: list[str]) -> None:
    assert gpucheck.dry_run_lines(spec, torch) == lines
