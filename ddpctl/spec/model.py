"""The job spec as frozen dataclasses: the contract every other part of ddpctl reads (no I/O, no validation here;
`ddpctl.spec.load` builds them from YAML and checks every field)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ddpctl.record import Record
from ddpctl.spec import capabilities
from ddpctl.spec.capabilities import Capabilities


@dataclass(frozen=True, eq=False, repr=False)  # eq, hash, repr: Record (start-up time)
class NcclSettings(Record):
    """The spec's `nccl:` section: the NCCL/Gloo settings every rank gets."""

    socket_ifname: str | None = None  # NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME; None = detect non-loopback
    ib_disable: bool = False
    debug: str | None = None  # NCCL_DEBUG: VERSION, WARN, INFO, TRACE
    timeout_s: int = 1800  # process-group timeout
    async_error_handling: bool = True


@dataclass(frozen=True, eq=False, repr=False)  # eq, hash, repr: Record (start-up time)
class RequeuePolicy(Record):
    """The spec's `requeue:` section: the warning signal and the budgets that decide whether a run goes on."""

    enabled: bool = True
    signal: str = "USR2"  # USR1 is grabbed by some NCCL builds; USR2 is safe
    lead_s: int = 120  # seconds before the time limit the warning signal is sent
    max_preemptions: int = 10
    max_timeouts: int = 3
    max_failures: int = 0  # requeues after the script's error or OOM (torchrun's own restarts come first)
    # Requeues after an infrastructure failure: a rank killed by a signal, a lost node, a hang the watchdog ended
    # (ddpctl.node.blame). One false alarm then costs a restart from the checkpoint, not the run.
    max_node_failures: int = 5
    # Failed attempts in a row that ended without a complete checkpoint newer than the one they resumed from (the
    # same crash at the same step): the run ends at this many instead of spending its budgets (0: never).
    max_stalled_attempts: int = 3
    # A script that checkpoints itself gets this signal on every rank when a stop is requested (None: not sent);
    # its exit with status 0 after the request then counts as "stopped for requeue".
    script_signal: str | None = None
    mode: str = "auto"  # requeue (the job requeues itself), chain (a successor job continues the run) or auto


@dataclass(frozen=True, eq=False, repr=False)  # eq, hash, repr: Record (start-up time)
class CheckpointSettings(Record):
    """The spec's `checkpoint:` section: where checkpoints go and how many are kept."""

    dir: str | None = None  # None = <run dir>/checkpoints
    keep: int = 3
    # How the script's own checkpoints are named (ddpctl.spec.resume: `{step}`, `*`, a trailing `/` = directory),
    # for `resume:` without a preset and for the per-attempt resume report; None = the preset's, if any.
    pattern: str | None = None


@dataclass(frozen=True, eq=False, repr=False)  # eq, hash, repr: Record (start-up time)
class ResumeSettings(Record):
    """The spec's `resume:` section: arguments added to the script's own only when a complete checkpoint exists."""

    preset: str | None = None  # hf-trainer, lightning, nanogpt, torch-snapshot (ddpctl.spec.resume.PRESETS)
    args: tuple[str, ...] | None = None  # None = the preset's; `{latest}`, `{ckpt_dir}` substituted

    @property
    def enabled(self) -> bool:
        return self.preset is not None or self.args is not None


@dataclass(frozen=True, eq=False, repr=False)  # eq, hash, repr: Record (start-up time)
class HealthSettings(Record):
    """The spec's `health:` section: the hang watchdog's allowances, straggler flagging, the node preflight."""

    hang_timeout_s: int | None = None  # None: derived from observed step times (>= hang_floor_s); 0: off
    # Defaults and their reasoning: README, "Hang watchdog". Above PyTorch's 2 min NCCL heartbeat, below its
    # 10 min collective timeout (which would end the ranks without a stack dump).
    hang_floor_s: int = 300  # the derived timeout is never shorter
    startup_s: int = 1800  # allowance before a rank's first progress record (imports, data, compilation, resume)
    checkpoint_s: int = 600  # extra allowance while a rank is saving a checkpoint
    pause_s: int = 1800  # extra allowance while a rank is in a declared pause (Heartbeat.pause) without its own
    straggler_factor: float = 2.0  # busy time above this x the other ranks' median flags a straggler; 0: off
    straggler_steps: int = 20  # ... over the rank's last this many steps
    # Each node proves it can train before torchrun (ddpctl.node.nodecheck): True every attempt, False never,
    # None (auto) on the attempt after an infrastructure failure only, so a first start costs nothing.
    preflight: bool | None = None
    preflight_timeout_s: int = 60  # the check's network stages (a node's store, the group, the all-reduce)
    # The site's own node check (DCGM diagnostics, a vendor script): a shell command run in the preflight before
    # torch's checks, the user's own like `setup` lines; non-zero or outliving its bound fails the node.
    node_check: str | None = None
    node_check_timeout_s: int = 120  # DCGM's quick diagnostic (-r 1) takes seconds, a vendor script a minute
    # None: off. Every this many minutes while training runs, each launcher runs the node check and the built-in
    # checks again in the background (ddpctl.node.recheck); a failure ends the attempt, blaming that node.
    node_check_every_min: float | None = None


@dataclass(frozen=True, eq=False, repr=False)  # eq, hash, repr: Record (start-up time)
class ContainerSettings(Record):
    """The image the nodes' launcher, torchrun and workers run in (the batch shell stays on the host)."""

    runtime: str | None = None  # pyxis, apptainer, singularity, podman, charliecloud; None = no container
    image: str | None = None
    mounts: tuple[str, ...] = ()  # SRC[:DST[:OPTS]] besides the automatic ones (run dir, script dir)
    workdir: str | None = None  # None = the script's directory
    env: tuple[str, ...] = ()  # names of host variables passed into the container
    options: tuple[str, ...] = ()  # extra runtime arguments, verbatim

    @property
    def enabled(self) -> bool:
        return self.runtime is not None


@dataclass(frozen=True, eq=False, repr=False)  # eq, hash, repr: Record (start-up time)
class NotifySettings(Record):
    """The spec's `notify:` section (ddpctl.spec.notify checks it, ddpctl.run.notify sends)."""

    on: tuple[str, ...] = ("finish", "failure", "hang", "node-lost", "slowdown", "last-requeue", "vanished", "stalled")
    webhook_env: str | None = None  # the environment variable holding the webhook URL (a secret: never in the spec)
    webhook_file: str | None = None  # ... or a file holding it
    webhook_format: str = "json"  # json (a generic object) or slack (Slack-compatible {"text": ...})
    command: tuple[str, ...] = ()  # argv run with the notice as JSON on stdin
    mail_to: tuple[str, ...] = ()
    mail_from: str | None = None  # None: ddpctl@<this host>
    smtp_host: str | None = None  # host[:port]; None: the site's sendmail
    smtp_tls: str = "none"  # none, starttls (upgrade a plain connection) or ssl (implicit TLS, smtplib.SMTP_SSL)
    smtp_user: str | None = None  # log in as this user (AUTH), with the password from
    smtp_password_env: str | None = None  # ... an environment variable (a secret: never in the spec)
    smtp_password_file: str | None = None  # ... or a file
    smtp_ca_file: str | None = None  # the CA bundle that vouches for the relay (None: the system's)
    sendmail: str | None = None  # None: "sendmail" on PATH (then /usr/sbin/sendmail)
    timeout_s: int = 10  # per attempt of a channel; one retry

    @property
    def channels(self) -> list[str]:
        webhook = self.webhook_env or self.webhook_file
        return [name for name, on in (("webhook", webhook), ("command", self.command), ("mail", self.mail_to)) if on]


@dataclass(frozen=True, eq=False, repr=False)  # eq, hash, repr: Record (start-up time)
class MfuSettings(Record):
    """The spec's `mfu:` section (ddpctl.spec.mfu checks it, ddpctl.health.mfu computes MFU with it)."""

    flops_per_sample: float | None = None  # training FLOPs per sample (forward and backward)
    params: float | None = None  # ... or a transformer's parameter count, with
    tokens_per_sample: float | None = None  # ... its tokens per sample: 6 x params x tokens
    peak_tflops: float | None = None  # one GPU's peak; None: the table of common GPUs (ddpctl.health.mfu)

    @property
    def flops(self) -> float | None:
        if self.params is not None and self.tokens_per_sample is not None:
            return 6.0 * self.params * self.tokens_per_sample  # ddpctl.health.mfu.transformer_flops
        return self.flops_per_sample


# The spec's nested sections: key -> the record its mapping becomes (ddpctl.spec.load builds them).
SECTIONS: dict[str, type[Record]] = {
    "nccl": NcclSettings,
    "requeue": RequeuePolicy,
    "checkpoint": CheckpointSettings,
    "health": HealthSettings,
    "container": ContainerSettings,
    "notify": NotifySettings,
    "resume": ResumeSettings,
    "mfu": MfuSettings,
}


@dataclass(frozen=True, eq=False, repr=False)  # eq, hash, repr: Record (start-up time)
class JobSpec(Record):
    """A whole job spec, checked: what `ddpctl.spec.load` builds and every other part of ddpctl reads."""

    name: str
    script: str
    args: tuple[str, ...] = ()
    nodes: int = 1
    gpus_per_node: int = 0
    nproc_per_node: int = 1
    cpus_per_task: int | None = None
    mem: str | None = None
    time: str | None = None
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    sbatch: tuple[tuple[str, str | bool | int], ...] = ()  # other sbatch long options, in spec order
    setup: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    nccl: NcclSettings = field(default_factory=NcclSettings)
    requeue: RequeuePolicy = field(default_factory=RequeuePolicy)
    checkpoint: CheckpointSettings = field(default_factory=CheckpointSettings)
    health: HealthSettings = field(default_factory=HealthSettings)
    container: ContainerSettings = field(default_factory=ContainerSettings)
    notify: NotifySettings = field(default_factory=NotifySettings)
    resume: ResumeSettings = field(default_factory=ResumeSettings)
    mfu: MfuSettings = field(default_factory=MfuSettings)
    run_dir: str = "runs"
    template: str = "ddp"
    backend: str = "sbatch"
    max_restarts: int = 0  # torchrun --max-restarts (in-job restarts of the worker group)
    spare_nodes: int = 0  # nodes held beyond `nodes`: a failed attempt restarts on them inside the allocation
    rdzv: str = "auto"  # "c10d", "static", or "auto": static without in-job restarts, c10d with them (`rendezvous`)
    python: str | None = None  # interpreter for workers (in the image with a container); None = ddpctl's own
    snapshot: str = "auto"  # code snapshot at submit: auto, git, dir or off (ddpctl.snapshot)
    snapshot_exclude: tuple[str, ...] = ()  # globs left out of the snapshot; "!glob" keeps a data-like file
    tracking: tuple[str, ...] = ()  # experiment trackers given one identity for all attempts (run.tracking)
    cluster: str | None = None  # a remote cluster of clusters.yaml to submit on over SSH (ddpctl.remote); None: here
    source: str = "<spec>"  # the file the spec came from, for messages

    @property
    def capabilities(self) -> Capabilities:
        """What this spec's backend can do: callers ask it, not the backend's name."""
        return capabilities.of(self.backend)

    @property
    def rendezvous(self) -> str:
        """The torchrun rendezvous this spec gets. `auto` is static when `max_restarts` is 0: nothing then needs
        c10d's re-rendezvous, and static starts the workers ~1 s sooner (c10d's agents poll its state once a
        second while they wait for each other)."""
        if self.rdzv == "auto":
            return "c10d" if self.max_restarts > 0 else "static"
        return self.rdzv

    @property
    def alloc_nodes(self) -> int:
        """The nodes the job asks Slurm for: `nodes` for training plus the `spare_nodes` a failed attempt restarts
        on inside the allocation (a backend that starts every attempt itself holds no spares)."""
        return self.nodes + (0 if self.capabilities.own_attempts else self.spare_nodes)

    @property
    def world_size(self) -> int:
        return self.nodes * self.nproc_per_node

    @property
    def run_base(self) -> Path:
        """Directory that holds this job name's run directories (one per job id)."""
        return Path(self.run_dir) / self.name
