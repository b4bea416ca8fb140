"""Property-based fuzzing of spec input (issue 10): generated specs and --set overrides through `render` and
`submit --dry-run` must end in exit 0 or 2, never a traceback; an error is one line; a failure writes no file;
time and memory stay bounded.

Runs the CLI in-process (`ddpctl.cli.main`) for speed, with a fixed, derandomized budget so CI sees the same
examples every time (about a minute on 2 cores); tests/spec/test_hostile_input.py runs hand-picked cases as
real subprocesses.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import yaml
from clitools import REPO
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ddpctl.cli import main

TRAIN = str(REPO / "jobs/example/train.py")
TIME_LIMIT_S = 15.0  # per command; a merge-key bomb took 21 s before the fix, 10,000 dry-run nodes 26 s
MEMORY_LIMIT = 256 << 20  # peak Python allocations per command; the same bomb took 4 GB
BUDGET = settings(
    max_examples=800,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

NASTY_TEXT = st.sampled_from(
    [
        "",
        " ",
        "~",
        "~nosuchuser/x",
        "{x}",
        "{rank}",
        "%j",
        "%%",
        "a\x00b",
        "a\x07b",
        "\x1b[31m",
        "\udc80",
        "x\ud800",
        "\u202e",
        "é",
        "日本",
        "a" * 300,
        "-",
        "--x",
        "$(id)",
        "`id`",
        "'",
        '"',
        "\\",
        "\n",
        "\r",
        "\t",
        "null",
        "yes",
        "on",
        "010",
        "0x10",
        "1:00",
        "1_000",
        "1e3",
        ".inf",
        "-.nan",
        "!!python/object:os.system",
        "*a",
        "&a x",
        "<<",
        "[",
        "{",
        "}",
        "]",
        ":",
        "#",
        "|",
        ">",
        "@",
        "`",
    ]
)
TEXT = st.one_of(NASTY_TEXT, st.text(max_size=20))
INTEGER = st.one_of(
    st.integers(-3, 70),
    st.sampled_from([0, 1, 2, 4097, 16385, 65535, 65536, 2**31 - 1, 2**31, 2**63, 10**12, -(2**63)]),
)
SCALAR = st.one_of(TEXT, INTEGER, st.booleans(), st.none(), st.floats(allow_nan=True, allow_infinity=True))
VALUE = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)),
    max_leaves=12,
)
TOP_KEYS = [
    "name",
    "script",
    "args",
    "nodes",
    "gpus_per_node",
    "nproc_per_node",
    "cpus_per_task",
    "mem",
    "time",
    "partition",
    "account",
    "qos",
    "sbatch",
    "setup",
    "env",
    "run_dir",
    "template",
    "backend",
    "max_restarts",
    "rdzv",
    "python",
    "nccl",
    "requeue",
    "checkpoint",
    "health",
    "tracking",
    "cluster",
    "notify",
    "resume",
    "mfu",
]
SUB_KEYS = {
    "nccl": ["socket_ifname", "ib_disable", "debug", "timeout_s", "async_error_handling"],
    "requeue": ["enabled", "signal", "lead_s", "max_preemptions", "max_timeouts", "max_failures"],
    "checkpoint": ["dir", "keep", "pattern"],
    "resume": ["preset", "args"],
    "mfu": ["flops_per_sample", "params", "tokens_per_sample", "peak_tflops"],
    "health": [
        "preflight",
        "preflight_timeout_s",
        "node_check",
        "node_check_timeout_s",
        "node_check_every_min",
        "hang_timeout_s",
    ],
    "notify": [
        "on",
        "webhook_env",
        "webhook_file",
        "webhook_format",
        "webhook_url",
        "command",
        "mail_to",
        "mail_from",
        "smtp_host",
        "sendmail",
        "smtp_tls",
        "smtp_user",
        "smtp_password_env",
        "smtp_password_file",
        "smtp_password",
        "smtp_ca_file",
        "timeout_s",
    ],
    "sbatch": ["constraint", "exclusive", "job-n", "ntasks-per-n", "outp", "gpus", "gres", "time"],
    "env": ["A", "OMP_NUM_THREADS", "1BAD", "PATH"],
}
KEY_PATH = st.one_of(
    st.sampled_from(TOP_KEYS).map(lambda k: k),
    st.sampled_from(sorted(SUB_KEYS)).flatmap(lambda k: st.sampled_from(SUB_KEYS[k]).map(lambda s: f"{k}.{s}")),
    TEXT,
)
OVERRIDE = st.one_of(
    st.tuples(KEY_PATH, st.one_of(TEXT, INTEGER.map(str), VALUE.map(lambda v: yaml.safe_dump(v).strip()))).map(
        lambda kv: f"{kv[0]}={kv[1]}"
    ),
    TEXT,
)
NOTIFY_VALUE = st.sampled_from(
    [
        "HOOK",
        "a@example.org",
        ["a@example.org"],
        "mail:25",
        "h:99999",
        ["finish", "hang"],
        ["/bin/true"],
        "slack",
        5,
        "starttls",
        "ssl",
        "none",
        "localhost",
        "ops",
        "/etc/ssl/ca.pem",
    ]
)
# This round's resume block and `$NAME` in args: presets, placeholders, variables the job sets and does not.
RESUME_VALUE = st.sampled_from(
    ["hf-trainer", "lightning", "nanogpt", "torch-snapshot", "nope", ["--resume_from_checkpoint", "{latest}"],
     ["--ckpt", "{ckpt_dir}/x"], ["{oops}"], ["$DDPCTL_CKPT_DIR/a", "${UNSET_THING}", "$$5", "$"], "step-{step}.pt",
     "checkpoint-{step}/", "{step}{step}", "../{step}"]
)  # fmt: skip
# The mfu block: counts written as YAML reads them (6e12 is a string to PyYAML), zero, negatives, overflow.
MFU_VALUE = st.sampled_from([6e12, "6e12", "1.5E+9", "1e999", "6e", 0, -1, 7, 2048, 989.5, True, None, "x", [1]])
GOOD = {"name": "fuzz", "script": TRAIN, "backend": "sbatch", "nodes": 2}


@st.composite
def spec_text(draw: st.DrawFn) -> str:
    """A YAML spec: a valid base with some keys replaced by generated values, or raw generated text."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.one_of(TEXT, st.text(max_size=200)))
    data: dict[str, Any] = dict(GOOD)
    for key in draw(st.lists(st.sampled_from(TOP_KEYS), max_size=4)):
        data[key] = draw(VALUE)
    if draw(st.integers(0, 3)) == 0:  # a notify block of known keys, so its cross-key checks are reached too
        keys = draw(st.lists(st.sampled_from(SUB_KEYS["notify"]), max_size=4))
        data["notify"] = {key: draw(st.one_of(VALUE, NOTIFY_VALUE)) for key in keys}
    if draw(st.integers(0, 3)) == 0:  # a resume block, a checkpoint pattern and args with `$NAME`
        data["resume"] = {key: draw(RESUME_VALUE) for key in draw(st.lists(st.sampled_from(["preset", "args"])))}
        data["checkpoint"] = {"pattern": draw(st.one_of(RESUME_VALUE, VALUE))}
        data["args"] = draw(st.lists(st.one_of(TEXT, st.sampled_from(["$DDPCTL_CKPT_DIR", "${NOPE}", "$$"]))))
    if draw(st.integers(0, 3)) == 0:  # an mfu block of known keys: one way to give the work, or both
        keys = draw(st.lists(st.sampled_from(SUB_KEYS["mfu"]), max_size=4))
        data["mfu"] = {key: draw(st.one_of(VALUE, MFU_VALUE)) for key in keys}
    if draw(st.booleans()):
        data[draw(TEXT)] = draw(VALUE)
    return yaml.safe_dump(data, allow_unicode=draw(st.booleans()), sort_keys=False)


def listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def run_bounded(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    tracemalloc.start()
    started = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)  # an exception escaping here is a traceback for the user: the test fails
    finally:
        elapsed = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert elapsed < TIME_LIMIT_S, (argv, elapsed)
    assert peak < MEMORY_LIMIT, (argv, peak)
    return code, out.getvalue(), err.getvalue()


@BUDGET
@given(text=spec_text(), overrides=st.lists(OVERRIDE, max_size=3), to_file=st.booleans())
def test_render_and_dry_run_fail_cleanly(text: str, overrides: list[str], to_file: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        spec = root / "spec.yaml"
        spec.write_bytes(text.encode("utf-8", "surrogatepass"))
        sets = [f"--set={override}" for override in overrides]  # the form that takes a value starting with "-"
        before = listing(root)
        out_file = root / "out" / "job.sh"
        (root / "out").mkdir()
        commands = [
            ["render", str(spec), *sets, *(["-o", str(out_file)] if to_file else [])],
            ["submit", str(spec), "--dry-run", *sets],
        ]
        for argv in commands:
            cwd = Path.cwd()
            os.chdir(root)  # relative paths in a generated spec resolve here, not in the repository
            try:
                code, _, err = run_bounded(argv)
            finally:
                os.chdir(cwd)
            assert code in (0, 2), (argv, code, err)
            if code == 2:
                assert err.startswith("ddpctl: error: ") and err.count("\n") == 1, err
                assert "Traceback" not in err
                assert listing(root) == before | {"out"}, "a failed command left files behind"
            elif argv[0] == "render" and to_file:
                assert out_file.is_file()
                out_file.unlink()


@settings(
    max_examples=8,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(text=spec_text(), overrides=st.lists(OVERRIDE, max_size=2))
def test_the_real_cli_fails_cleanly_too(text: str, overrides: list[str]) -> None:
    """A few of the same through a real `python -m ddpctl` process: its real stdout/stderr encodings."""
    import resource
    import subprocess
    import sys

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    # An argv entry cannot hold NUL (the OS refuses it before ddpctl runs); the in-process test covers NUL.
    assume(all("\x00" not in o for o in overrides))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "spec.yaml").write_bytes(text.encode("utf-8", "surrogatepass"))
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ddpctl",
                "submit",
                "spec.yaml",
                "--dry-run",
                *[f"--set={o}".encode("utf-8", "surrogatepass") for o in overrides],
            ],
            cwd=root,
            capture_output=True,
            timeout=60,
            check=False,
            preexec_fn=limited,
            env={**os.environ, "DDPCTL_HOME": str(root / "home"), "PYTHONPATH": str(REPO)},
        )
        err = done.stderr.decode("utf-8", "backslashreplace")
        assert done.returncode in (0, 2), err
        if done.returncode == 2:
            assert err.startswith("ddpctl: error: ") and err.count("\n") == 1, err
            assert listing(root) <= {"spec.yaml", "home", "home/registry.jsonl"}
