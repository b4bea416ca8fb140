"""ddpctl.slurm.hostlist: literal tables, round trips, and an oracle check against `scontrol`."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from ddpctl.errors import HostlistError
from ddpctl.proc import run
from ddpctl.slurm.hostlist import MAX_HOSTS, compress, expand

EXPANSIONS = [
    ("n1", ["n1"]),
    ("n[1,3-5]", ["n1", "n3", "n4", "n5"]),
    ("n[09-11]", ["n09", "n10", "n11"]),
    ("n[9-11]", ["n9", "n10", "n11"]),
    ("n[009-11]", ["n009", "n010", "n011"]),
    ("n[9-011]", ["n9", "n10", "n11"]),  # only the lower bound's width counts
    ("n[01-3]", ["n01", "n02", "n03"]),
    ("n[0-0]", ["n0"]),
    ("n[00]", ["n00"]),
    ("rack[1-2]-node[01-02]", ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"]),
    ("n[1-2][3-4]", ["n13", "n14", "n23", "n24"]),
    # scontrol nests a product from the second-to-last group outwards; the last group varies fastest.
    ("a[1-2]b[1-2]c[1-2]", ["a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2", "a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2"]),
    ("a[1-2][3-4][5-6]", ["a135", "a136", "a235", "a236", "a145", "a146", "a245", "a246"]),
    ("n[1-2]-[3-4]", ["n1-3", "n1-4", "n2-3", "n2-4"]),
    ("a-[1-2]", ["a-1", "a-2"]),
    ("gpu-a-b-c", ["gpu-a-b-c"]),
    ("n1,n1,n2", ["n1", "n1", "n2"]),
    ("n[1-3,2]", ["n1", "n2", "n3", "n2"]),
    ("n[1-3],n[2-4]", ["n1", "n2", "n3", "n2", "n3", "n4"]),
    ("n[01-02,3]", ["n01", "n02", "n3"]),
    ("n01,n1", ["n01", "n1"]),
    ("[1-3]", ["1", "2", "3"]),
    ("a[1-2],[3-4]", ["a1", "a2", "3", "4"]),
    (",n1,,n2,", ["n1", "n2"]),
    ("n1 n2\tn3\nn4\rn5", ["n1", "n2", "n3", "n4", "n5"]),
    ("n[1-2] m[1-2]", ["n1", "n2", "m1", "m2"]),
    (
        "a[1-2,4]-b[01-02,10]",
        ["a1-b01", "a1-b02", "a1-b10", "a2-b01", "a2-b02", "a2-b10", "a4-b01", "a4-b02", "a4-b10"],
    ),
    ("n[99999999999-100000000001]", ["n99999999999", "n100000000000", "n100000000001"]),
    ("n%d[1-2]", ["n%d1", "n%d2"]),
    ("n.x[1-2],n_y,a:b,a=b", ["n.x1", "n.x2", "n_y", "a:b", "a=b"]),
]

# Rejected by scontrol too (it prints "Invalid hostlist" on stderr, with exit status 0).
MALFORMED_BOTH = [
    "n[3-1]",
    "n[]",
    "n[1-3x]",
    "n[[1]]",
    "n[1-2]]",
    "n[1,,2]",
    "n[,1]",
    "n[-1]",
    "n[1-2-3]",
    "n[a-c]",
    "n[0x1-0x3]",
    "a[1-2]b",
    "[1-2]x",
    "a[1-2]b[1-2]c",
    "n[1-2]-",
    "n[1-2],m[3-1]",
    "n[0-65536]",
    "n[1-65537]",
]
# scontrol accepts these and prints something surprising; we refuse them (see the module docstring).
MALFORMED_OURS_ONLY = [
    "",
    " ",
    ",",
    "n[1",
    "n1]",
    "n[1-3",
    "n[[1-2]",
    "a]b[1-2]",
    "n[ 1-2]",
    "n[1 -2]",
    "n[+1-2]",
    "n[1-]",
    "a[1-300]b[1-300]",
    "n[1-40000,1-40000]",
]


@pytest.mark.parametrize(("text", "hosts"), EXPANSIONS)
def test_expand_table(text: str, hosts: list[str]) -> None:
    assert expand(text) == hosts


@pytest.mark.parametrize("text", MALFORMED_BOTH + MALFORMED_OURS_ONLY)
def test_malformed_raises_naming_input(text: str) -> None:
    with pytest.raises(HostlistError) as info:
        expand(text)
    assert repr(text) in str(info.value)
    assert "\n" not in str(info.value)


def test_limit_is_inclusive() -> None:
    assert len(expand(f"n[1-{MAX_HOSTS}]")) == MAX_HOSTS
    assert len(expand("a[1-256]b[1-256]")) == MAX_HOSTS


COMPRESSIONS = [
    (["n1"], "n1"),
    (["n1", "n2", "n3", "n5"], "n[1-3,5]"),
    (["n09", "n10", "n11"], "n[09-11]"),
    (["n01", "n2"], "n[01,2]"),
    (["n9", "n10"], "n[9-10]"),
    (["b", "n1", "n2", "a"], "b,n[1-2],a"),
    (["n2", "n1"], "n[2,1]"),
    (["n1", "n1"], "n[1,1]"),
    (["x1-y1", "x1-y2", "x2-y1"], "x1-y[1-2],x2-y1"),
    (["5", "6"], "[5-6]"),
    ([], ""),
]


@pytest.mark.parametrize(("hosts", "text"), COMPRESSIONS)
def test_compress_table(hosts: list[str], text: str) -> None:
    assert compress(hosts) == text
    if hosts:
        assert expand(text) == hosts


@pytest.mark.parametrize("text", [t for t, _ in EXPANSIONS] + ["gpu-a[00001-20000],b[1-50]c[1-40],x"])
def test_compress_round_trips(text: str) -> None:
    hosts = expand(text)
    assert expand(compress(hosts)) == hosts


def test_compress_splits_past_the_limit() -> None:
    hosts = [f"n{i}" for i in range(MAX_HOSTS + 2)]
    assert expand(compress(hosts)) == hosts


@pytest.mark.parametrize("bad", ["", "a,b", "a b", "a[1]", "x]"])
def test_compress_refuses_unwritable_names(bad: str) -> None:
    with pytest.raises(HostlistError):
        compress(["n1", bad])


def _random_group(rng: random.Random) -> str:
    items = []
    for _ in range(rng.choice([1, 1, 2, 3])):
        lo = rng.randrange(0, 120)
        width = len(str(lo)) + rng.choice([0, 0, 1, 2])
        lo_text = f"{lo:0{width}d}"
        if rng.random() < 0.3:
            items.append(lo_text)
        else:
            hi = lo + rng.randrange(0, 12)
            items.append(f"{lo_text}-{hi:0{rng.choice([1, 3])}d}")
    return "[" + ",".join(items) + "]"


def _random_name(rng: random.Random) -> str:
    prefix = rng.choice(["n", "gpu-", "rack", "a-b-", "", "node_", "x.y", "c1-"])
    if rng.random() < 0.2:
        return prefix + rng.choice(["login", "7", "01", "head-0"])
    parts = [prefix + _random_group(rng)]
    for _ in range(rng.choice([0, 0, 1, 1, 2])):
        parts.append(rng.choice(["-node", "", "x", "-", "s"]) + _random_group(rng))
    return "".join(parts)


def oracle_expressions() -> list[str]:
    rng = random.Random(20240521)  # noqa: S311 -- a fixed, reproducible table, not a secret
    generated = []
    for _ in range(200):
        names = [_random_name(rng) for _ in range(rng.choice([1, 1, 2, 3]))]
        if rng.random() < 0.15:
            names.append(names[0])  # duplicates must survive
        generated.append(rng.choice([",", ",", " "]).join(names))
    return [t for t, _ in EXPANSIONS] + generated


@pytest.fixture(scope="module")
def scontrol_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    if shutil.which("scontrol") is None:
        reason = "scontrol is not on PATH, so hostlists cannot be compared with Slurm's own parser"
        if os.environ.get("DDPCTL_REQUIRE_SLURM") == "1":
            pytest.fail(f"DDPCTL_REQUIRE_SLURM=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    conf: Path = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    # `show hostnames` never contacts a controller but refuses to start without a parseable config.
    conf.write_text("ClusterName=oracle\nSlurmctldHost=localhost\nNodeName=n1\nPartitionName=p Nodes=n1\n")
    return {**os.environ, "SLURM_CONF": str(conf)}


def _scontrol(expr: str, env: dict[str, str]) -> tuple[list[str], str]:
    done = run(["scontrol", "show", "hostnames", expr], env=env)
    # scontrol exits 0 even for an invalid hostlist; the error shows only on stderr.
    assert done.returncode == 0, done.stderr
    return done.stdout.split(), done.stderr


def test_oracle_agrees_with_scontrol(scontrol_env: dict[str, str]) -> None:
    expressions = oracle_expressions()
    assert len(expressions) >= 200
    mismatches = []
    for expr in expressions:
        theirs, err = _scontrol(expr, scontrol_env)
        assert "Invalid hostlist" not in err, f"scontrol rejects {expr!r}: {err}"
        if expand(expr) != theirs:
            mismatches.append(expr)
    assert not mismatches, f"{len(mismatches)} of {len(expressions)} differ, e.g. {mismatches[:5]}"


# Slurm 24.11 (checked on 24.11.5) expands these, 22.05 rejects them; neither writes one when it compresses names
# (`scontrol show hostlist a1b,a2b` stays `a1b,a2b`), so no job's SLURM_JOB_NODELIST holds one, and ddpctl
# keeps 22.05's rule (tests/cluster/README.md).
ACCEPTED_SINCE_24_11 = {
    "n[[1]]": ["n[1]"],
    "n[1-2]]": ["n1]", "n2]"],
    "a[1-2]b": ["a1b", "a2b"],
    "[1-2]x": ["1x", "2x"],
    "a[1-2]b[1-2]c": ["a1b1c", "a1b2c", "a2b1c", "a2b2c"],
    "n[1-2]-": ["n1-", "n2-"],
}


def scontrol_version(env: dict[str, str]) -> tuple[int, int]:
    words = run(["scontrol", "--version"], env=env).stdout.split()  # "slurm 22.05.8" / "slurm-wlm 24.11.5"
    major, minor = words[-1].split(".")[:2]
    return int(major), int(minor)


@pytest.mark.parametrize("expr", MALFORMED_BOTH)
def test_oracle_rejects_what_we_reject(expr: str, scontrol_env: dict[str, str]) -> None:
    hosts, err = _scontrol(expr, scontrol_env)
    if expr in ACCEPTED_SINCE_24_11 and scontrol_version(scontrol_env) >= (24, 11):
        assert hosts == ACCEPTED_SINCE_24_11[expr] and not err  # exactly what tests/cluster/README.md says
        return
    assert hosts == []
    assert "Invalid hostlist" in err


@pytest.mark.parametrize("expr", sorted(e for e, names in ACCEPTED_SINCE_24_11.items() if "[" not in "".join(names)))
def test_slurm_never_compresses_names_into_a_form_we_refuse(expr: str, scontrol_env: dict[str, str]) -> None:
    names = ACCEPTED_SINCE_24_11[expr]
    done = run(["scontrol", "show", "hostlist", ",".join(names)], env=scontrol_env)
    assert done.returncode == 0 and done.stdout.strip() == ",".join(names), done.stdout + done.stderr


def test_long_inputs_stay_linear() -> None:
    names = [f"host{i}x" for i in range(50000)]
    assert expand(",".join(names) + ",n[1-2]") == [*names, "n1", "n2"]
    assert expand(",".join(names)) == names


def test_huge_numbers() -> None:
    with pytest.raises(HostlistError, match="up to 18 digits"):
        expand("n[" + "1" * 5000 + "]")
    long_name = "n" + "7" * 30
    assert expand(long_name) == [long_name]
    assert compress([long_name, "n" + "7" * 29 + "8"]) == "n" + "7" * 12 + "[777777777777777777-777777777777777778]"
