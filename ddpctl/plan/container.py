"""The container command per runtime (pure): how each node's `ddpctl launch` is started inside the image.

Only the launcher, torchrun and the workers run in the image; the batch shell (signal trap, decisions,
`scontrol requeue`) stays on the host. What makes the rest work unchanged:
- the job's run base (its run dirs: logs, events, stop files, checkpoints), the code snapshot store, the
  script's directory and a
  `checkpoint.dir` are bind-mounted at the same paths, so every path in job.yaml means the same inside;
- the host network (pyxis, apptainer and charliecloud do not make a network namespace; podman gets
  `--network=host`), so torchrun's rendezvous and Gloo/NCCL reach the other nodes;
- the stop signal that `scancel --signal` sends to the step's task reaches the launcher: `ch-run` and
  `apptainer exec` exec the payload in-process (the task is the launcher), pyxis starts the task itself inside
  the container, and `podman run` proxies it (`--sig-proxy`, the default) to `--init`, which forwards it;
- the step's cgroups hold the workers: podman gets `--cgroups=disabled` (else it makes its own cgroups
  outside the job's, escaping Slurm's CPU/memory/device limits and its cleanup; needs the crun runtime);
- the Slurm and ddpctl variables reach the launcher: every runtime but podman passes the host environment
  through; podman gets `--env` for them (globs) and for the spec's variable names.

The image must contain python3 (or the spec's `python`) with torch and ddpctl importable; `ddpctl doctor`
runs `python -m ddpctl --version` in it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from ddpctl import pyargv
from ddpctl.errors import SpecError
from ddpctl.snapshot.store import STORE_DIR
from ddpctl.spec import JobSpec

# Variables podman must be told to pass (the other runtimes pass the host environment through).
PODMAN_ENV_GLOBS = ("SLURM_*", "SLURMD_*", "DDPCTL_*", "NCCL_*", "GLOO_*", "TORCH*", "OMP_*", "CUDA_*")


@dataclass(frozen=True)
class ContainerCommand:
    srun_options: tuple[str, ...]  # options for the launch step's srun (pyxis takes the container there)
    prefix: tuple[str, ...]  # words before the image's interpreter
    python: str  # the interpreter in the image
    exports: tuple[tuple[str, str], ...] = ()  # batch-shell exports (name, value as a shell word)

    def words(self) -> tuple[str, ...]:
        """The launch command after `srun`, for a run dir given as the last word."""
        return (*self.srun_options, *self.prefix, *pyargv.python_module(self.python, "ddpctl"), "launch")

    def shell(self) -> str:
        return " ".join(shlex.quote(word) for word in self.words())


def automatic_mounts(spec: JobSpec) -> tuple[str, ...]:
    """Host directories the job needs, at the same path inside: run base, code snapshot store (the attempts run
    the script from there), script directory, checkpoint dir."""
    paths = [str(Path(spec.run_dir) / spec.name), str(Path(spec.script).parent)]
    if spec.snapshot != "off":
        paths.insert(1, str(Path(spec.run_dir) / STORE_DIR))
    if spec.checkpoint.dir:
        paths.append(spec.checkpoint.dir)
    mounts = []
    for path in dict.fromkeys(paths):
        if "," in path or ":" in path:
            raise SpecError(f"{spec.source}: container: cannot mount {path!r}: commas and colons separate mounts")
        mounts.append(f"{path}:{path}")
    return tuple(mounts)


def workdir(spec: JobSpec) -> str:
    return spec.container.workdir or str(Path(spec.script).parent)


def container_command(spec: JobSpec) -> ContainerCommand:
    box = spec.container
    if box.runtime is None or box.image is None:
        raise ValueError("container_command: the spec has no container")
    mounts = (*automatic_mounts(spec), *box.mounts)
    python = spec.python or "python3"
    if box.runtime == "pyxis":
        return ContainerCommand(pyxis_options(spec, mounts), (), python)
    if box.runtime in ("apptainer", "singularity"):
        return apptainer_command(spec, mounts, python)
    if box.runtime == "podman":
        return ContainerCommand((), podman_prefix(spec, mounts), python)
    # ch-run refuses to start without $USER, which a batch job may lack.
    return ContainerCommand((), charliecloud_prefix(spec, mounts), python, (("USER", '"${USER:-$(id -un)}"'),))


def pyxis_options(spec: JobSpec, mounts: tuple[str, ...]) -> tuple[str, ...]:
    """srun's pyxis options; GPUs come from enroot's NVIDIA hook for the GPUs Slurm allocated (no flag)."""
    box = spec.container
    options = [
        f"--container-image={box.image}",
        f"--container-mounts={','.join(mounts)}",
        f"--container-workdir={workdir(spec)}",
    ]
    if box.env:
        options.append(f"--container-env={','.join(box.env)}")  # the host's value wins over the image's
    return (*options, *box.options)


def apptainer_command(spec: JobSpec, mounts: tuple[str, ...], python: str) -> ContainerCommand:
    """`apptainer exec`: --nv with GPUs; APPTAINERENV_<NAME> sets a variable even under --cleanenv."""
    box = spec.container
    runtime = str(box.runtime)
    gpu = ("--nv",) if spec.gpus_per_node else ()
    prefix = (runtime, "exec", *gpu, "--bind", ",".join(mounts), "--pwd", workdir(spec), *box.options, str(box.image))
    exports = tuple((f"{runtime.upper()}ENV_{name}", f'"${{{name}-}}"') for name in box.env)
    return ContainerCommand((), prefix, python, exports)


def podman_image(image: str) -> tuple[str, ...]:
    """A path is a root directory (`--rootfs DIR[:O]`), anything else an image name (as paths.py decides)."""
    return ("--rootfs", image) if image.startswith((".", "/", "~")) else (image,)


def podman_prefix(spec: JobSpec, mounts: tuple[str, ...]) -> tuple[str, ...]:
    """`podman run`: host network and IPC, the step's cgroups, --init to forward signals, CDI devices for GPUs."""
    box = spec.container
    words = ["podman", "run", "--rm", "--init", "--sig-proxy=true", "--cgroups=disabled", "--network=host"]
    words.append("--ipc=host")
    for mount in mounts:
        words += ["--volume", mount]
    words += ["--workdir", workdir(spec)]
    names = (*PODMAN_ENV_GLOBS, *(name for name, _ in spec.env), *box.env)
    for name in dict.fromkeys(names):
        words += ["--env", name]
    if spec.gpus_per_node:
        words += ["--device", "nvidia.com/gpu=all"]  # CDI; Slurm's CUDA_VISIBLE_DEVICES picks the allocated ones
    return (*words, *box.options, *podman_image(str(box.image)))


def charliecloud_prefix(spec: JobSpec, mounts: tuple[str, ...]) -> tuple[str, ...]:
    """`ch-run`: GPUs need the host's driver libraries injected once into the image (`ch-fromhost --nvidia`)."""
    box = spec.container
    words = ["ch-run"]
    for mount in mounts:
        words += ["--bind", mount]
    words += ["--cd", workdir(spec)]
    return (*words, *box.options, str(box.image), "--")


PROBE_TIMEOUT_S = 300.0  # a first podman/apptainer run may convert or pull layers


def probe_argv(spec: JobSpec) -> tuple[str, ...] | None:
    """`python -m ddpctl --version` in the image, run on this host (no mounts: the run dir may not exist yet);
    None for pyxis, which needs srun on a node."""
    box = spec.container
    python = (spec.python or "python3", "-m", "ddpctl", "--version")
    image = str(box.image)
    if box.runtime in ("apptainer", "singularity"):
        return (str(box.runtime), "exec", *box.options, image, *python)
    if box.runtime == "podman":
        return ("podman", "run", "--rm", *box.options, *podman_image(image), *python)
    if box.runtime == "charliecloud":
        return ("ch-run", *box.options, image, "--", *python)
    return None


def probe_verdict(spec: JobSpec, returncode: int | None, output: str) -> tuple[bool, str]:
    """(ok, detail) for the probe's result; returncode None = the runtime is not installed here."""
    box = spec.container
    python = spec.python or "python3"
    if returncode is None:
        program = "ch-run" if box.runtime == "charliecloud" else box.runtime
        return False, f"{program} is not on PATH here (the nodes need it too)"
    version = output.strip().splitlines()[-1] if output.strip() else ""
    if returncode == 0 and version.startswith("ddpctl "):
        return True, f"{box.runtime} image {box.image}: {version} ({python})"
    why = version or f"exit {returncode}"
    return False, (
        f"{box.runtime} image {box.image}: `{python} -m ddpctl --version` failed ({why}); "
        f"the image must contain {python} with torch and ddpctl (pip install ddpctl in the image)"
    )
