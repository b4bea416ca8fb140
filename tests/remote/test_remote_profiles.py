"""Cluster profiles (ddpctl.remote.profiles): literal clusters.yaml texts and the one line each bad one gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpctl.errors import SpecError
from ddpctl.remote.profiles import (
    MAX_BYTES,
    MAX_CLUSTERS,
    Cluster,
    clusters_path,
    find,
    parse_clusters,
    read_clusters,
    with_defaults,
)

GOOD = """\
gpu:
  ssh: me@login.example.org
  ddpctl: /opt/venv/bin/ddpctl
  workdir: /scratch/me/ddpctl
  defaults:
    partition: gpu
    account: proj42
    sbatch: {constraint: a100}
cpu:
  ssh: cpu-login
  ddpctl: [python3, -m, ddpctl]
"""


def test_a_full_file_reads_into_profiles() -> None:
    clusters = parse_clusters(GOOD, "clusters.yaml")
    assert clusters == {
        "gpu": Cluster(
            "gpu",
            "me@login.example.org",
            ("/opt/venv/bin/ddpctl",),
            "/scratch/me/ddpctl",
            {"partition": "gpu", "account": "proj42", "sbatch": {"constraint": "a100"}},
        ),
        "cpu": Cluster("cpu", "cpu-login", ("python3", "-m", "ddpctl")),
    }


def test_an_empty_file_has_no_clusters() -> None:
    assert parse_clusters("", "c.yaml") == {}
    assert parse_clusters("# nothing yet\n", "c.yaml") == {}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu:\n  shh: login\n", "c.yaml:2: gpu.shh: unknown key, did you mean 'ssh'?"),
        ("gpu:\n  ssh: login\n  work_dir: /x\n", "c.yaml:3: gpu.work_dir: unknown key, did you mean 'workdir'?"),
        (
            "gpu: {ssh: login, defaults: {partiton: gpu}}\n",
            "c.yaml:1: gpu.defaults.partiton: unknown key, did you mean 'partition'?",
        ),
        ("gpu: {ssh: login, defaults: {cluster: cpu}}\n", "c.yaml:1: gpu.defaults.cluster: unknown key, expected"),
        ("gpu: {ssh: login, defaults: {nodes: 0}}\n", "c.yaml:1: gpu.defaults.nodes: got 0, expected an integer in"),
        ("gpu: {ssh: login, defaults: {partition: 'a b'}}\n", "c.yaml:1: gpu.defaults.partition: got 'a b'"),
        ("gpu:\n  ddpctl: ddpctl\n", "c.yaml:1: gpu.ssh: missing, expected the ssh destination"),
        (
            "gpu: {ssh: -oProxyCommand=touch_x}\n",
            "c.yaml:1: gpu.ssh: got '-oProxyCommand=touch_x', expected an ssh destination (host, user@host or a",
        ),
        ("gpu: {ssh: 'a b'}\n", "c.yaml:1: gpu.ssh: got 'a b', expected an ssh destination"),
        ("gpu: {ssh: login, ddpctl: []}\n", "c.yaml:1: gpu.ddpctl: got [], expected a command such as ddpctl"),
        ("gpu: {ssh: login, ddpctl: 'a \"b'}\n", "c.yaml:1: gpu.ddpctl: got 'a \"b', expected a command"),
        ("gpu: [login]\n", "c.yaml:1: gpu: got ['login'] (a list), expected a profile mapping"),
        ("- gpu\n", "c.yaml:1: top level: got ['gpu'] (a list), expected a mapping of cluster names"),
        ("'g p': {ssh: login}\n", "c.yaml:1: g p: got 'g p', expected a cluster name matching"),
        ("gpu: {ssh: a}\ngpu: {ssh: b}\n", "c.yaml:2: gpu: duplicate key, first set on line 1"),
        ("gpu: {ssh: a\n", "c.yaml:2: invalid YAML"),
        ("a: {ssh: a}\nb: {ssh: !!python/name:os.system ''}\n", "c.yaml:2: invalid YAML: could not determine"),
    ],
)
def test_a_bad_profile_is_one_line_naming_file_key_and_value(text: str, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_clusters(text, "c.yaml")
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_the_number_of_clusters_is_bounded() -> None:
    text = "".join(f"c{i}: {{ssh: h{i}}}\n" for i in range(MAX_CLUSTERS + 1))
    with pytest.raises(SpecError, match=f"got {MAX_CLUSTERS + 1} clusters, expected at most {MAX_CLUSTERS}"):
        parse_clusters(text, "c.yaml")
    assert len(parse_clusters("".join(f"c{i}: {{ssh: h{i}}}\n" for i in range(MAX_CLUSTERS)), "c.yaml")) == MAX_CLUSTERS


def test_the_file_size_is_bounded_and_a_missing_file_is_no_clusters(tmp_path: Path) -> None:
    big = tmp_path / "clusters.yaml"
    big.write_text("# " + "x" * MAX_BYTES + "\n")
    with pytest.raises(SpecError, match=f"clusters.yaml: clusters file larger than {MAX_BYTES} bytes"):
        read_clusters(big)
    assert read_clusters(tmp_path / "absent.yaml") == {}
    (tmp_path / "bin.yaml").write_bytes(b"gpu: {ssh: \xff}\n")
    with pytest.raises(SpecError, match=r"bin\.yaml: cannot read clusters file: not UTF-8"):
        read_clusters(tmp_path / "bin.yaml")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"DDPCTL_CLUSTERS": "/etc/c.yaml", "XDG_CONFIG_HOME": "/x"}, "/etc/c.yaml"),
        ({"XDG_CONFIG_HOME": "/cfg"}, "/cfg/ddpctl/clusters.yaml"),
        ({"HOME": "/home/me"}, str(Path("~/.config/ddpctl/clusters.yaml").expanduser())),
    ],
)
def test_where_the_file_is(env: dict[str, str], expected: str) -> None:
    assert str(clusters_path(env)) == expected


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("gpx", "unknown cluster 'gpx' in c.yaml, did you mean 'gpu'?"),
        ("zzz", "unknown cluster 'zzz' in c.yaml, expected one of cpu, gpu"),
    ],
)
def test_an_unknown_cluster_name_says_did_you_mean(name: str, message: str) -> None:
    clusters = parse_clusters(GOOD, "c.yaml")
    assert find(clusters, "gpu", Path("c.yaml")).ssh == "me@login.example.org"
    with pytest.raises(SpecError) as caught:
        find(clusters, name, Path("c.yaml"))
    assert str(caught.value) == message
    with pytest.raises(SpecError, match=r"unknown cluster 'gpu': no clusters defined in c\.yaml"):
        find({}, "gpu", Path("c.yaml"))


@pytest.mark.parametrize(
    ("spec", "defaults", "merged"),
    [
        ({"name": "a"}, {"partition": "gpu"}, {"name": "a", "partition": "gpu"}),
        ({"partition": "debug"}, {"partition": "gpu", "account": "p"}, {"partition": "debug", "account": "p"}),
        (
            {"sbatch": {"constraint": "h100"}, "env": {"A": "1"}},
            {"sbatch": {"constraint": "a100", "reservation": "r"}, "env": {"B": "2"}},
            {"sbatch": {"constraint": "h100", "reservation": "r"}, "env": {"B": "2", "A": "1"}},
        ),
        ({"setup": ["module load x"]}, {"setup": ["module load y"]}, {"setup": ["module load x"]}),
        ({"requeue": {"max_preemptions": 3}}, {"requeue": None}, {"requeue": {"max_preemptions": 3}}),
    ],
)
def test_defaults_go_under_the_spec(spec: dict[str, object], defaults: dict[str, object], merged: object) -> None:
    assert with_defaults(spec, defaults) == merged
