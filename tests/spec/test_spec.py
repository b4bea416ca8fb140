"""Spec errors: one line naming the file:line (or --set), the key, the bad value and what is allowed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ddpctl.errors import SpecError
from ddpctl.spec import load_spec, spec_from_mapping
from ddpctl.spec.templates import template_names

HEAD = "name: demo\nscript: train.py\n"  # lines 1-2: the cases below start on line 3
BASE = {"name": "x", "script": "t.py"}


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "train.py").write_text("print('hi')\n")  # HEAD's script, beside the spec file
    return tmp_path


def spec_error(text: str, overrides: tuple[str, ...] = (), *, check_paths: bool = True) -> str:
    Path("jobs/x.yaml").write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec("jobs/x.yaml", overrides, check_paths=check_paths)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("node: 2\n", "3: node: unknown key, did you mean 'nodes'?"),
        ("nccl:\n  timout_s: 5\n", "4: nccl.timout_s: unknown key, did you mean 'timeout_s'?"),
        (
            "requeue:\n  max_preemption: 1\n",
            "4: requeue.max_preemption: unknown key, did you mean 'max_preemptions'?",
        ),
        ("checkpoint:\n  kep: 1\n", "4: checkpoint.kep: unknown key, did you mean 'keep'?"),
        ("zzz: 1\n", "3: zzz: unknown key, expected one of name, script, args, nodes,"),
        # What people write first (issue 45): launchers' names for our keys, and a script's own values
        ("nproc: 2\n", "3: nproc: unknown key, did you mean 'nproc_per_node'?"),
        ("gpus: 4\n", "3: gpus: unknown key, did you mean 'gpus_per_node'?"),
        ("nnodes: 2\n", "3: nnodes: unknown key, did you mean 'nodes'?"),
        (
            "lr: 0.1\n",
            "3: lr: unknown key, not a ddpctl key: the script's own value goes in args (args: [--lr, ...]) or env "
            "(env: {LR: ...})",
        ),
        ("batch_size: 8\n", "3: batch_size: unknown key, not a ddpctl key: the script's own value goes in args"),
        ("requeue:\n  lr: 1\n", "4: requeue.lr: unknown key, expected one of "),  # only where args is a key
        ("nodes: true\n", "3: nodes: got true (a boolean), expected an integer in 1..16384"),
        ("nodes: '2'\n", "3: nodes: got '2' (a string), expected an integer in 1..16384"),
        ("nodes: 1.5\n", "3: nodes: got 1.5 (a float), expected an integer in 1..16384"),
        ("nodes:\n", "3: nodes: got null, expected an integer in 1..16384"),
        ("nodes: 0\n", "3: nodes: got 0, expected an integer in 1..16384"),
        ("nproc_per_node: 0\n", "3: nproc_per_node: got 0, expected an integer in 1..4096"),
        ("gpus_per_node: -1\n", "3: gpus_per_node: got -1, expected an integer in 0..4096"),
        ("cpus_per_task: 0\n", "3: cpus_per_task: got 0, expected an integer in 1..4096 or null"),
        ("max_restarts: -1\n", "3: max_restarts: got -1, expected an integer in 0..2147483647"),
        (
            "max_restarts: 2\nrdzv: static\n",
            "4: rdzv: got 'static', expected c10d or auto with max_restarts > 0 (static rendezvous cannot restart:",
        ),
        ("tracking: [comet]\n", "3: tracking.0: got 'comet', expected one of wandb, mlflow, tensorboard"),
        ("tracking: [wandb, wandb]\n", "3: tracking.1: got 'wandb', expected a list of wandb, mlflow, tensorboard,"),
        ("tracking: {wandb: 1}\n", "3: tracking: got {'wandb': 1} (a mapping), expected a list of strings"),
        ("clustr: gpu\n", "3: clustr: unknown key, did you mean 'cluster'?"),
        ("cluster: -gpu\n", "3: cluster: got '-gpu', expected a string matching [A-Za-z0-9][A-Za-z0-9._-]{0,63}"),
        ("cluster: [gpu]\n", "3: cluster: got ['gpu'] (a list), expected a string matching"),
        ("time: 1:2:3:4\n", "3: time: got '1:2:3:4', expected a Slurm time (M, M:S, H:M:S, D-H,"),
        ("time: 1h\n", "3: time: got '1h', expected a Slurm time"),
        ("time: 0\n", "3: time: got '0', expected a Slurm time"),
        ("time: 0\n", "3: time: got '0', expected a Slurm time (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) or"),
        (
            "gpus_per_node: 2\nnproc_per_node: 4\n",
            "4: nproc_per_node: got 4, expected at most gpus_per_node (2)",
        ),
        (
            "time: 5\nrequeue:\n  lead_s: 300\n",
            "5: requeue.lead_s: got 300, expected less than the time limit",
        ),
        ("time: 2\n", "3: time: got '2', expected more than requeue.lead_s (120 s)"),
        ("mem: 4GB\n", "3: mem: got '4GB', expected a string matching [0-9]+[KMGT]?"),
        (
            "partition: 'gpu;rm -rf'\n",
            "3: partition: got 'gpu;rm -rf', expected a string matching [A-Za-z0-9._-]+(,",
        ),
        ("account: a b\n", "3: account: got 'a b', expected a string matching [A-Za-z0-9._-]+"),
        ("qos: '$(id)'\n", "3: qos: got '$(id)', expected a string matching"),
        ("backend: slurm\n", "3: backend: got 'slurm', expected one of sbatch, submitit, local"),
        ("rdzv: etcd\n", "3: rdzv: got 'etcd', expected one of auto, c10d, static"),
        ("nccl: [1, 2]\n", "3: nccl: got [1, 2] (a list), expected a mapping with keys socket_ifname,"),
        ("env: [A, B]\n", "3: env: got ['A', 'B'] (a list), expected a mapping of"),
        ("sbatch: exclusive\n", "3: sbatch: got 'exclusive' (a string), expected a mapping of sbatch"),
        ("args: --lr 1\n", "3: args: got '--lr 1' (a string), expected a list of strings"),
        ("nccl:\n  ib_disable: 'yes'\n", "4: nccl.ib_disable: got 'yes' (a string), expected true or false"),
        ("nccl:\n  debug: LOUD\n", "4: nccl.debug: got 'LOUD', expected one of VERSION, WARN, INFO, TRACE"),
        ("nccl:\n  timeout_s: 0\n", "4: nccl.timeout_s: got 0, expected an integer in 1..2147483647"),
        ("nccl:\n  socket_ifname: eth0 eth1\n", "4: nccl.socket_ifname: got 'eth0 eth1', expected"),
        ("requeue:\n  enabled: 1\n", "4: requeue.enabled: got 1 (an integer), expected true or false"),
        (
            "requeue:\n  signal: TERM\n",
            "4: requeue.signal: got 'TERM', expected one of USR1, USR2, URG, ALRM",
        ),
        (
            "requeue:\n  signal: SIGKILL\n",
            "4: requeue.signal: got 'SIGKILL', expected one of USR1, USR2, URG, ALRM",
        ),
        ("requeue:\n  lead_s: 0\n", "4: requeue.lead_s: got 0, expected an integer in 1..65535"),
        ("requeue:\n  lead_s: 65536\n", "4: requeue.lead_s: got 65536, expected an integer in 1..65535"),
        ("requeue:\n  max_failures: -1\n", "4: requeue.max_failures: got -1, expected an integer in 0..2147483647"),
        ("checkpoint:\n  keep: 0\n", "4: checkpoint.keep: got 0, expected an integer in 1..2147483647"),
        ("health:\n  straggler_factor: -1\n", "4: health.straggler_factor: got -1, expected a number >= 0"),
        ("health:\n  straggler_factor: yes\n", "4: health.straggler_factor: got true (a boolean), expected a"),
        ("health:\n  straggler_factor: .nan\n", "4: health.straggler_factor: got nan, expected a number >= 0"),
        ("health:\n  straggler_factor: .inf\n", "4: health.straggler_factor: got inf, expected a number >= 0"),
        ("health:\n  hang_timeout_s: 1.5\n", "4: health.hang_timeout_s: got 1.5 (a float), expected an integer"),
        ("health:\n  straggler_steps: 1\n", "4: health.straggler_steps: got 1, expected an integer in 2..2147483647"),
        ("health:\n  hang_floor: 3\n", "4: health.hang_floor: unknown key, did you mean 'hang_floor_s'?"),
        ("health:\n  preflight: maybe\n", "4: health.preflight: got 'maybe' (a string), expected true, false or auto"),
        ("health:\n  preflight: 1\n", "4: health.preflight: got 1 (an integer), expected true, false or auto"),
        ("health:\n  preflight_timeout_s: 2\n", "4: health.preflight_timeout_s: got 2, expected an integer in 5..3600"),
        ("health:\n  node_check: ''\n", "4: health.node_check: got '', expected a shell command (the site's node"),
        ("health:\n  node_check: [a]\n", "4: health.node_check: got ['a'] (a list), expected a shell command"),
        ("health:\n  node_check_timeout_s: 0\n", "4: health.node_check_timeout_s: got 0, expected an integer in"),
        ("health:\n  node_check_every_min: 0\n", "4: health.node_check_every_min: got 0, expected a number in 0.05."),
        ("health:\n  node_check_every_min: 1441\n", "4: health.node_check_every_min: got 1441, expected a number in"),
        ("health:\n  node_check_every_min: -5\n", "4: health.node_check_every_min: got -5, expected a number in"),
        ("health:\n  node_check_every_min: .nan\n", "4: health.node_check_every_min: got nan, expected a number in"),
        ("health:\n  node_check_every_min: 5m\n", "4: health.node_check_every_min: got '5m' (a string), expected a"),
        ("health:\n  node_check_every_min: no\n", "4: health.node_check_every_min: got false (a boolean), expected"),
        ("health:\n  node_check_every: 5\n", "4: health.node_check_every: unknown key, did you mean 'node_check_ev"),
        ("env:\n  1BAD: x\n", "4: env.1BAD: got '1BAD', expected an environment variable name matching"),
        (
            "env:\n  A-B: x\n",
            "4: env.A-B: got 'A-B', expected an environment variable name matching [A-Za-z_][A-Za-z0-9_]*",
        ),
        ("env:\n  X:\n", "4: env.X: got null, expected a scalar value"),
        ('env:\n  X: "a\\0b"\n', "4: env.X: got 'a\\x00b', expected a scalar value"),
        ("sbatch:\n  Exclusive: true\n", "4: sbatch.Exclusive: got 'Exclusive', expected an sbatch long"),
        (
            "sbatch:\n  'x;y': 1\n",
            "4: sbatch.x;y: got 'x;y', expected an sbatch long option name matching [a-z][a-z0-9-]*",
        ),
        ("sbatch:\n  time: 5\n", "4: sbatch.time: ddpctl sets --time itself: use time"),
        (
            "sbatch:\n  signal: B:USR1@60\n",
            "4: sbatch.signal: ddpctl sets --signal itself: use requeue.signal and requeue.lead_s",
        ),
        ('sbatch:\n  comment: "a\\nb"\n', "4: sbatch.comment: got 'a\\nb', expected a single-line value"),
        ("sbatch:\n  comment: [a]\n", "4: sbatch.comment: got ['a'] (a list), expected a string, an integer"),
        ('args: [ok, "a\\0b"]\n', "3: args.1: got 'a\\x00b', expected a string without NUL bytes"),
        ("args:\n  - ok\n  - {a: 1}\n", "5: args.1: got {'a': 1} (a mapping), expected a string"),
        ('setup: ["x\\0"]\n', "3: setup.0: got 'x\\x00', expected a string without NUL bytes"),
        ("nodes: 1\nnodes: 2\n", "4: nodes: duplicate key, first set on line 3"),
        ('env: {"A\\nB": x}\n', "3: 'env.A\\nB': got 'A\\nB', expected an environment variable name"),
        ("? [a]\n: 1\n", "3: ?: got a list as a key, expected a plain key name"),
        ("args: &a [*a]\n", "3: args.0: recursive YAML alias"),
        ("python: ''\n", "3: python: got '', expected an interpreter name or path or null"),
        ("run_dir:\n", "3: run_dir: got null, expected a directory path"),
        ("template: nosuch\n", "3: template: got 'nosuch', expected a shipped template ("),
        ("template: my/t.sbatch.j2\n", "3: template: got 'my/t.sbatch.j2', expected an existing .j2 file"),
    ],
)
def test_file_errors(body: str, expected: str) -> None:
    assert f"jobs/x.yaml:{expected}" in spec_error(HEAD + body)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "name: 'a b'\nscript: train.py\n",
            "jobs/x.yaml:1: name: got 'a b', expected a name matching [A-Za-z0-9._-]+",
        ),
        ("name: a/b\nscript: train.py\n", "jobs/x.yaml:1: name: got 'a/b', expected a name matching"),
        ("name: ..\nscript: train.py\n", "jobs/x.yaml:1: name: got '..', expected a name matching"),
        (f"name: {'a' * 129}\nscript: train.py\n", "(at most 128 characters, not only dots)"),
        ("script: train.py\n", "jobs/x.yaml: name: missing, expected a job name"),
        ("name: demo\n", "jobs/x.yaml: script: missing, expected a path"),
        ("name: demo\nscript: gone.py\n", "jobs/x.yaml:2: script: got 'gone.py', expected an existing file"),
        ("name: demo\nscript: train.py\nnodes: 2\n  bad: 1\n", "jobs/x.yaml:4: invalid YAML:"),
        ("name: demo\nscript: train.py\nnodes: [1,\n", "jobs/x.yaml:4: invalid YAML: while parsing a flow"),
        ("name: demo\n\tscript: train.py\n", "jobs/x.yaml:2: invalid YAML:"),
        ("name: !!python/object:os.system x\n", "jobs/x.yaml:1: invalid YAML:"),
        ("", "jobs/x.yaml: empty spec, expected a mapping with at least 'name' and 'script'"),
        ("# nothing here\n", "jobs/x.yaml: empty spec"),
        ("- a\n- b\n", "jobs/x.yaml:1: top level: got ['a', 'b'] (a list), expected a mapping of spec keys"),
        ("just text\n", "jobs/x.yaml:1: top level: got 'just text' (a string), expected a mapping"),
    ],
)
def test_document_errors(text: str, expected: str) -> None:
    assert expected in spec_error(text)


def test_unknown_template_lists_shipped_names() -> None:
    message = spec_error(HEAD + "template: nosuch\n")
    assert all(name in message for name in template_names())


def test_paths_are_not_checked_without_check_paths(workdir: Path) -> None:
    Path("jobs/x.yaml").write_text("name: demo\nscript: gone.py\ntemplate: nosuch\n")
    assert load_spec("jobs/x.yaml", check_paths=False).script == str(workdir / "jobs" / "gone.py")


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("nodes", "--set nodes: expected KEY=VALUE with a dotted spec key, e.g. --set nodes=2"),
        ("=3", "--set =3: expected KEY=VALUE"),
        ("nccl..debug=INFO", "--set nccl..debug=INFO: expected KEY=VALUE"),
        ("node=2", "--set node=2: node: unknown key, did you mean 'nodes'?"),
        ("nccl.debugg=INFO", "--set nccl.debugg=INFO: nccl.debugg: unknown key, did you mean 'debug'?"),
        ("nodes.x=1", "--set nodes.x=1: nodes.x: unknown key, nodes has no sub-key 'x'"),
        ("env.A.B=1", "--set env.A.B=1: env.A.B: unknown key, env has no sub-key 'A.B'"),
        ("nodes=0", "--set nodes=0: nodes: got 0, expected an integer in 1..16384"),
        ("nodes=[", "--set nodes=[: invalid YAML:"),
        (
            "nccl={timeout_s: 0}",
            "--set nccl={timeout_s: 0}: nccl.timeout_s: got 0, expected an integer in 1..2147483647",
        ),
        (
            "nccl={timeot_s: 5}",
            "--set nccl={timeot_s: 5}: nccl.timeot_s: unknown key, did you mean 'timeout_s'?",
        ),
        ("env.1X=a", "--set env.1X=a: env.1X: got '1X', expected an environment variable name"),
        ("time=1h", "--set time=1h: time: got '1h', expected a Slurm time"),
    ],
)
def test_override_errors(override: str, expected: str) -> None:
    assert expected in spec_error(HEAD, (override,))


def test_override_into_a_list_names_the_file_line() -> None:
    message = spec_error(HEAD + "nccl: [1]\n", ("nccl.debug=INFO",))
    assert message == "jobs/x.yaml:3: nccl: got [1] (a list), expected a mapping (to apply --set nccl.debug=INFO)"


def test_later_override_is_named_for_a_bad_value() -> None:
    message = spec_error(HEAD + "nodes: 2\n", ("nodes=3", "nodes=-1"))
    assert message.startswith("--set nodes=-1: nodes: got -1")


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda p: None, "jobs/x.yaml: cannot read spec file: No such file or directory"),
        (lambda p: p.mkdir(), "jobs/x.yaml: cannot read spec file: Is a directory"),
        (lambda p: p.write_bytes(b"name: \xff\xfe\n"), "jobs/x.yaml: cannot read spec file: not UTF-8 text"),
    ],
)
def test_unreadable_files(make: object, expected: str) -> None:
    make(Path("jobs/x.yaml"))  # type: ignore[operator]
    with pytest.raises(SpecError) as info:
        load_spec("jobs/x.yaml")
    assert expected in str(info.value)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of their mode")
def test_file_without_read_permission() -> None:
    Path("jobs/x.yaml").write_text(HEAD)
    Path("jobs/x.yaml").chmod(0)
    with pytest.raises(SpecError, match=r"^jobs/x\.yaml: cannot read spec file: Permission denied$"):
        load_spec("jobs/x.yaml")


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({**BASE, "nodes": 0}, "<spec>: nodes: got 0, expected an integer in 1..16384"),
        ({**BASE, "nodes": False}, "<spec>: nodes: got false (a boolean), expected an integer"),
        ({**BASE, "nccl": {"ib_disabled": True}}, "<spec>: nccl.ib_disabled: unknown key"),
        ({**BASE, "env": {"X": None}}, "<spec>: env.X: got null, expected a scalar value"),
        ({**BASE, "args": "a b"}, "<spec>: args: got 'a b' (a string), expected a list"),
        ({**BASE, "setup": {"a": 1}}, "<spec>: setup: got {'a': 1} (a mapping), expected a list"),
        (["name", "x"], "<spec>: top level: got ['name', 'x'] (a list), expected a mapping of spec keys"),
    ],
)
def test_mapping_errors_name_the_source(data: object, expected: str) -> None:
    with pytest.raises(SpecError) as info:
        spec_from_mapping(data, check_paths=False)  # type: ignore[arg-type]
    assert str(info.value) == expected or str(info.value).startswith(expected)


def test_alias_bomb_is_refused() -> None:
    layers = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    layers += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 7)]
    message = spec_error("args:\n  " + "\n  ".join(f"- {layer.split(': ', 1)[1]}" for layer in layers) + "\n")
    assert message.startswith("jobs/x.yaml:") and "more than 100000 YAML values" in message


def test_deep_nesting_is_refused() -> None:
    assert spec_error(HEAD + "args: " + "[" * 1000 + "]" * 1000 + "\n") == (
        "jobs/x.yaml: invalid YAML: nested too deeply for a job spec"
    )


@pytest.mark.parametrize(
    ("option", "means"),
    [
        ("ntasks-per-n", "--ntasks-per-node"),
        ("job-n", "--job-name"),
        ("outp", "--output"),
        ("op", "--open-mode"),
        ("sig", "--signal"),
        ("part", "--partition"),
        ("q", "--qos"),
        ("wr", "--wrap"),
        ("no-req", "--no-requeue"),
        ("gpus-per", "--gpus-per-node"),
        ("cpus-per-t", "--cpus-per-task"),
        ("ti", "--time"),
        ("acc", "--account"),
        ("err", "--error"),
        ("no", "--no-requeue or --nodes"),
        ("ntasks-", "--ntasks-per-node"),
    ],
)
def test_abbreviations_of_reserved_sbatch_options_are_refused(option: str, means: str) -> None:
    message = spec_error(HEAD + f"sbatch:\n  {option}: x\n")
    assert f"sbatch.{option}: --{option} is an abbreviation sbatch reads as {means}, which ddpctl sets" in message


@pytest.mark.parametrize(
    "option",
    [
        "gpus",
        "mem-per-cpu",
        "ntasks-per-gpu",
        "time-min",
        "nodelist",
        "constraint",
        "exclusive",
        "gres",
        "oversubscribe",
    ],
)
def test_other_sbatch_options_and_their_abbreviations_are_kept(option: str) -> None:
    assert dict(spec_from_mapping({**BASE, "sbatch": {option: "1"}}, check_paths=False).sbatch) == {option: "1"}


def test_shipped_templates_come_from_this_checkout() -> None:
    # Regression: after the move into ddpctl/spec/ the checkout lookup went one level too shallow and silently
    # fell back to whatever `ddpctl.templates` an installed copy provided.
    from ddpctl.spec.templates import templates_dir

    assert templates_dir() == Path(__file__).resolve().parents[2] / "templates"
