"""Containers without a runtime: the command per runtime as literal tables (against each runtime's documented
command line), golden batch scripts, and rendered scripts EXECUTED with stub srun and stub runtimes that
record their argv and environment. The real run (Charliecloud on the cluster) is
tests/integration/test_container_charliecloud.py.

Documented forms checked here:
- pyxis: `srun --container-image=IMAGE --container-mounts=SRC:DST[:FLAGS][,...] --container-workdir=PATH
  --container-env=NAME[,...] CMD` (NVIDIA/pyxis wiki, Usage); GPUs by enroot's hook, no flag.
- apptainer/singularity: `apptainer exec [--nv] --bind SRC:DST[,...] --pwd DIR IMAGE CMD`; APPTAINERENV_X /
  SINGULARITYENV_X set X inside.
- podman: `podman run --rm --init --cgroups=disabled --network=host --volume SRC:DST --workdir DIR --env NAME
  [--device nvidia.com/gpu=all] IMAGE|--rootfs DIR[:O] CMD` (CDI device name of the NVIDIA Container Toolkit;
  `--rootfs` runs a directory as the root filesystem, `:O` over an overlay; podman-run(1), podman 4.3).
- charliecloud: `ch-run --bind SRC:DST --cd DIR IMAGE -- CMD`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from clitools import checkout_at
from stubtools import write_command

from ddpctl.errors import SpecError
from ddpctl.plan.container import container_command, probe_argv, probe_verdict
from ddpctl.plan.doctor import WARN, Facts, check_container
from ddpctl.plan.render import RenderInputs, render_script
from ddpctl.spec import load_spec, resolve_paths, spec_from_mapping, spec_to_mapping

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).parent / "golden"
RUNTIMES = ("pyxis", "apptainer", "singularity", "podman", "charliecloud")
MOUNTS = "/p/runs/ex:/p/runs/ex,/p/runs/.snapshots:/p/runs/.snapshots,/p/jobs:/p/jobs,/data:/data:ro"


def spec_for(runtime: str, gpus: int = 0, **container: object) -> object:
    box = {
        "runtime": runtime,
        "image": "/img/train.sqsh",
        "mounts": ["/data:/data:ro"],
        "env": ["HF_HOME"],
        **container,
    }
    return spec_from_mapping(
        {
            "name": "ex",
            "script": "/p/jobs/train.py",
            "run_dir": "/p/runs",
            "gpus_per_node": gpus,
            "env": {"OMP_NUM_THREADS": "1"},
            "container": box,
        },
        check_paths=False,
    )


# The image's interpreter runs ddpctl without the working directory on sys.path (a clone named ddpctl/ there).
BOOT = (
    'import runpy,sys;sys.path[:1]==[""] and sys.path.pop(0);'
    'runpy.run_module(sys.argv.pop(1),run_name="__main__",alter_sys=True)'
)
LAUNCH = ["python3", "-c", BOOT, "ddpctl", "launch"]
PROBE = ["python3", "-m", "ddpctl"]  # the version check runs with no mounts: no clone can be in its way
PODMAN = [
    "podman",
    "run",
    "--rm",
    "--init",
    "--sig-proxy=true",
    "--cgroups=disabled",
    "--network=host",
    "--ipc=host",
    "--volume",
    "/p/runs/ex:/p/runs/ex",
    "--volume",
    "/p/runs/.snapshots:/p/runs/.snapshots",
    "--volume",
    "/p/jobs:/p/jobs",
    "--volume",
    "/data:/data:ro",
    "--workdir",
    "/p/jobs",
    *[
        w
        for n in (
            "SLURM_*",
            "SLURMD_*",
            "DDPCTL_*",
            "NCCL_*",
            "GLOO_*",
            "TORCH*",
            "OMP_*",
            "CUDA_*",
            "OMP_NUM_THREADS",
            "HF_HOME",
        )
        for w in ("--env", n)
    ],
]
CASES = [
    (
        "pyxis",
        0,
        [
            "--container-image=/img/train.sqsh",
            f"--container-mounts={MOUNTS}",
            "--container-workdir=/p/jobs",
            "--container-env=HF_HOME",
            *LAUNCH,
        ],
    ),
    (
        "pyxis",
        4,
        [
            "--container-image=/img/train.sqsh",
            f"--container-mounts={MOUNTS}",
            "--container-workdir=/p/jobs",
            "--container-env=HF_HOME",
            *LAUNCH,
        ],
    ),
    ("apptainer", 0, ["apptainer", "exec", "--bind", MOUNTS, "--pwd", "/p/jobs", "/img/train.sqsh", *LAUNCH]),
    ("apptainer", 4, ["apptainer", "exec", "--nv", "--bind", MOUNTS, "--pwd", "/p/jobs", "/img/train.sqsh", *LAUNCH]),
    (
        "singularity",
        2,
        ["singularity", "exec", "--nv", "--bind", MOUNTS, "--pwd", "/p/jobs", "/img/train.sqsh", *LAUNCH],
    ),
    ("podman", 0, [*PODMAN, "--rootfs", "/img/train.sqsh", *LAUNCH]),
    ("podman", 4, [*PODMAN, "--device", "nvidia.com/gpu=all", "--rootfs", "/img/train.sqsh", *LAUNCH]),
    (
        "charliecloud",
        0,
        [
            "ch-run",
            "--bind",
            "/p/runs/ex:/p/runs/ex",
            "--bind",
            "/p/runs/.snapshots:/p/runs/.snapshots",
            "--bind",
            "/p/jobs:/p/jobs",
            "--bind",
            "/data:/data:ro",
            "--cd",
            "/p/jobs",
            "/img/train.sqsh",
            "--",
            *LAUNCH,
        ],
    ),
]


@pytest.mark.parametrize(("runtime", "gpus", "words"), CASES)
def test_command_per_runtime(runtime: str, gpus: int, words: list[str]) -> None:
    assert list(container_command(spec_for(runtime, gpus)).words()) == words  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("image", "tail"),
    [
        ("docker.io/library/train:1", ["docker.io/library/train:1"]),  # a name in podman's image storage
        ("train", ["train"]),
        ("/img/deb", ["--rootfs", "/img/deb"]),  # a directory: its root filesystem
        ("/img/deb:O", ["--rootfs", "/img/deb:O"]),  # over an overlay: the directory stays unchanged
        ("./deb", ["--rootfs", "./deb"]),  # relative paths are resolved against the spec before this
    ],
)
def test_podman_image_name_or_root_directory(image: str, tail: list[str]) -> None:
    words = list(container_command(spec_for("podman", image=image)).words())  # type: ignore[arg-type]
    assert words == [*PODMAN, *tail, *LAUNCH]
    probe = list(probe_argv(spec_for("podman", image=image)))  # type: ignore[arg-type]
    assert probe == ["podman", "run", "--rm", *tail, *PROBE, "--version"]


def test_workdir_python_and_options_are_the_users() -> None:
    spec = spec_from_mapping(
        {
            "name": "ex",
            "script": "/p/train.py",
            "run_dir": "/r",
            "python": "/opt/py/bin/python",
            "snapshot": "off",
            "container": {
                "runtime": "apptainer",
                "image": "i.sif",
                "workdir": "/w",
                "options": ["--cleanenv", "--contain"],
            },
        },
        check_paths=False,
    )
    words = container_command(spec).words()
    assert words == (
        "apptainer",
        "exec",
        "--bind",
        "/r/ex:/r/ex,/p:/p",
        "--pwd",
        "/w",
        "--cleanenv",
        "--contain",
        "i.sif",
        "/opt/py/bin/python",
        "-c",
        BOOT,
        "ddpctl",
        "launch",
    )
    assert resolve_paths(spec, Path("/cwd")).python == "/opt/py/bin/python"  # the image's path, left alone


@pytest.mark.parametrize(
    ("container", "backend", "message"),
    [
        ({"image": "x"}, "sbatch", "container.runtime: got null, expected one of pyxis"),
        ({"runtime": "podman"}, "sbatch", "container.image: got null, expected the image for podman"),
        ({"runtime": "docker", "image": "x"}, "sbatch", "container.runtime: got 'docker', expected one of"),
        (
            {"runtime": "podman", "image": "x", "mounts": ["data:/data"]},
            "sbatch",
            "container.mounts.0: got 'data:/data'",
        ),
        ({"runtime": "podman", "image": "x", "mounts": ["/a,/b"]}, "sbatch", "no commas"),
        ({"runtime": "podman", "image": "x", "env": ["A-B"]}, "sbatch", "container.env.0: got 'A-B'"),
        ({"runtime": "podman", "image": "x"}, "local", "containers run with backend sbatch only"),
        ({"runtime": "podman", "image": "x", "volume": "/a"}, "sbatch", "container.volume: unknown key"),
    ],
)
def test_bad_container_blocks(container: dict[str, object], backend: str, message: str) -> None:
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(".", r"\.")):
        spec_from_mapping(
            {"name": "ex", "script": "t.py", "backend": backend, "container": container}, check_paths=False
        )


def test_spec_round_trips_through_job_yaml() -> None:
    spec = spec_for("podman", 2)
    again = spec_from_mapping(yaml.safe_load(yaml.safe_dump(spec_to_mapping(spec))), check_paths=False)  # type: ignore[arg-type]
    assert again.container == spec.container  # type: ignore[attr-defined]


def render_example(runtime: str) -> str:
    spec = load_spec(
        ROOT / "jobs" / "example.yaml",
        [f"container.runtime={runtime}", "container.image=/images/train.img", "container.env=[HF_HOME]"],
    )
    spec = checkout_at(spec, Path("/project"))
    return render_script(spec, RenderInputs(run_base=Path("/project/runs/example"), python="/usr/bin/python3"))


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_golden_container_render(runtime: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    text = render_example(runtime)
    golden = GOLDEN / "containers" / f"example-{runtime}.sbatch"
    if os.environ.get("DDPCTL_UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()


# srun stub: records its argv, then runs the command after its own options (pyxis' stay with srun), as srun does.
SRUN = """#!/bin/bash
out="$STUB_OUT/srun"; mkdir -p "$out"; printf '%s\\0' "$@" > "$out/argv"
while [ "${1#--}" != "$1" ]; do shift; done
exec "$@"
"""
# A runtime stub records argv and environment; it does not run the payload.
RUNTIME = """#!/bin/bash
out="$STUB_OUT/runtime"; mkdir -p "$out"; printf '%s\\0' "$0" "$@" > "$out/argv"; env -0 > "$out/env"
"""


@pytest.mark.parametrize(("runtime", "gpus", "words"), [c for c in CASES if c[0] != "pyxis"] + [CASES[0]])
def test_rendered_script_runs_the_runtime(tmp_path: Path, runtime: str, gpus: int, words: list[str]) -> None:
    stubs, out = tmp_path / "bin", tmp_path / "out"
    for name, text in [
        ("srun", SRUN),
        ("scontrol", RUNTIME),
        ("scancel", RUNTIME),
        ("squeue", RUNTIME),
        ("python3" if runtime == "pyxis" else words[0], RUNTIME),
    ]:
        write_command(stubs, name, text)
    spec = spec_for(runtime, gpus)
    run_dir = tmp_path / "runs" / "ex" / "4242"
    run_dir.mkdir(parents=True)
    (run_dir / "job.yaml").write_text(yaml.safe_dump(spec_to_mapping(spec)))  # type: ignore[arg-type]
    script = tmp_path / "job.sbatch"
    script.write_text(render_script(spec, RenderInputs(run_base=run_dir.parent, python=sys.executable)))  # type: ignore[arg-type]
    env = {
        **os.environ,
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "STUB_OUT": str(out),
        "SLURM_JOB_ID": "4242",
        "HF_HOME": "/hf cache",
    }
    env.pop("USER", None)
    done = subprocess.run(
        ["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    srun = (out / "srun" / "argv").read_bytes().decode().split("\0")[:-1]
    assert srun == ["--ntasks-per-node=1", "--cpu-bind=none", "--kill-on-bad-exit=1", *words, str(run_dir)]
    ran = (out / "runtime" / "argv").read_bytes().decode().split("\0")[:-1]
    first = words.index("python3") if runtime == "pyxis" else 0
    assert [Path(ran[0]).name, *ran[1:]] == [*words[first:], str(run_dir)]
    ran_env = dict(i.split("=", 1) for i in (out / "runtime" / "env").read_bytes().decode().split("\0")[:-1])
    if runtime in ("apptainer", "singularity"):
        assert ran_env[f"{runtime.upper()}ENV_HF_HOME"] == "/hf cache"
    if runtime == "charliecloud":
        assert ran_env["USER"]  # ch-run refuses to start without it
    assert '"action": "finish"' in (run_dir / "events.jsonl").read_text()


@pytest.mark.parametrize(
    ("runtime", "returncode", "output", "ok", "detail"),
    [
        ("charliecloud", 0, "ddpctl 0.1.0\n", True, "charliecloud image /img/train.sqsh: ddpctl 0.1.0 (python3)"),
        (
            "podman",
            1,
            "/usr/bin/python3: No module named ddpctl\n",
            False,
            "podman image /img/train.sqsh: `python3 -m ddpctl --version` failed (/usr/bin/python3: No module named "
            "ddpctl); the image must contain python3 with torch and ddpctl (pip install ddpctl in the image)",
        ),
        ("apptainer", 127, "", False, "`python3 -m ddpctl --version` failed (exit 127)"),
        ("charliecloud", None, "", False, "ch-run is not on PATH here (the nodes need it too)"),
    ],
)
def test_doctor_probe_verdict(runtime: str, returncode: int | None, output: str, ok: bool, detail: str) -> None:
    got_ok, got = probe_verdict(spec_for(runtime), returncode, output)  # type: ignore[arg-type]
    assert got_ok == ok and detail in got


def test_doctor_probe_argv_and_pyxis_note() -> None:
    assert probe_argv(spec_for("charliecloud")) == ("ch-run", "/img/train.sqsh", "--", *PROBE, "--version")  # type: ignore[arg-type]
    podman = ("podman", "run", "--rm", "--rootfs", "/img/train.sqsh", *PROBE, "--version")
    assert probe_argv(spec_for("podman")) == podman  # type: ignore[arg-type]
    assert probe_argv(spec_for("pyxis")) is None  # type: ignore[arg-type]
    check = check_container(spec_for("pyxis"), Facts(tools={}))  # type: ignore[arg-type]
    assert check.status == WARN
    assert "srun -N1 --container-image=/img/train.sqsh python3 -m ddpctl --version" in check.detail
