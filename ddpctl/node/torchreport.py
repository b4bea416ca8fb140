"""What a node's launcher log (attempt-N/node-K.log, torchrun's output) says about its ranks' deaths (pure).

A rank killed by a signal (SIGKILL from the OOM killer, `kill -9`) writes nothing: its own log just stops, and
only the other ranks' knock-on NCCL/Gloo errors show up in the rank logs. torchrun's agent, though, reports
every failed local worker when it gives up, in a block like

    [0]:
      time      : 2026-11-23_13:37:14
      host      : node1
      rank      : 1 (local_rank: 1)
      exitcode  : -9 (pid: 27926)  (SIGKILL)

and logs the first one it noticed with a sub-second timestamp (glog format, no year):

    E1123 13:37:14.496000 27815 .../api.py:1002] failed (exitcode: -9) local_rank: 1 (pid: 27926) of binary: ...

`launcher_failures` turns that into one `LauncherFailure` per rank. A worker torchrun itself stopped with
SIGTERM after another one failed is collateral; any other signal is a failure of its own. The launcher records
these in its `node-exit` event (the batch shell's decision blames from them, `ddpctl.node.blame`), and
`ddpctl logs --errors` reads them from the log. An error text is collateral (`is_collateral`) when it is what
a surviving rank sees once a peer is gone: NCCL/Gloo/ProcessGroup errors, refused or closed connections.
"""

from __future__ import annotations

import re
import signal
import time
from dataclasses import dataclass

from ddpctl.run.history import OomKilled

_COLLATERAL = re.compile(
    r"NCCL|gloo|Gloo|Connection closed by peer|Connection reset by peer|communicator was aborted|ProcessGroup"
    r"|Watchdog caught collective operation timeout|DistBackendError|DistNetworkError|DistStoreError"
    r"|Broken pipe|SignalException|got signal: ?15|Socket Timeout|TCPStore"
    r"|Connection refused|connectFullMesh|remote process exited"
)
# Errors that happen the same way on every attempt and every node: the job's setup (its NCCL/CUDA use, its
# environment), never a node's fault and never a peer's death, though some name NCCL. NCCL's own words for its
# usage errors (ncclInvalidUsage, ncclInvalidArgument, a duplicate GPU), a CPU tensor on a GPU-only group, a torch
# without the CUDA the job asks for, a CUDA build too new for the driver or without kernels for the GPU, a module
# missing from the environment.
_SETUP = re.compile(
    r"invalid usage|ncclInvalidUsage|ncclInvalidArgument|Duplicate GPU detected"
    r"|No backend type associated with device type|Torch not compiled with CUDA enabled"
    r"|CUDA driver version is insufficient|no kernel image is available for execution"
    r"|ModuleNotFoundError|No module named"
)
_BLOCK = re.compile(r"^\[\d+\]:\s*$")
_FIELD = re.compile(r"^\s+(time|rank|exitcode)\s*:\s*(.*)$")
_RANK = re.compile(r"^(\d+)")
_EXIT = re.compile(r"^(-?\d+)(?:\s*\(pid:\s*(\d+)\))?")
_GLOG_FAILED = re.compile(
    r"^[EWIF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})(\.\d+)? .*failed \(exitcode: -?\d+\) local_rank: \d+ "
    r"\(pid: (\d+)\)"
)


def is_collateral(text: str) -> bool:
    """An error a rank gets because another one died (never the headline while a rank died of its own); a setup
    error is never collateral, whatever library it names."""
    return bool(_COLLATERAL.search(text)) and not is_setup_error(text)


# What a launcher that died before torchrun printed last: the CLI's one-line error, or a traceback's last line.
_ERROR_LINE = re.compile(r"^(ddpctl: error: .+|[A-Za-z_.]*(Error|Exception)\b.*)$")


def last_error(output: str) -> str:
    """The last error line in the batch output's tail: `ddpctl: error: ...` (the CLI's one-line errors) or a
    traceback's last line. A launcher that dies before torchrun leaves no rank record: this is its own word."""
    found = [line.strip() for line in output.splitlines() if _ERROR_LINE.match(line.strip())]
    return found[-1][:300] if found else ""


def is_setup_error(text: str) -> bool:
    """An error of the job's setup (`_SETUP`): it repeats on every attempt and blames no node."""
    return bool(_SETUP.search(text))


@dataclass(frozen=True)
class LauncherFailure:
    rank: int
    exitcode: int
    line_no: int  # 1-based line of the "rank :" field in the launcher log
    when: float | None  # epoch seconds, as precise as the log says; None if it gives no time
    oom_limit: str | None = None  # set when this SIGKILL was the node's OOM killer: the limit, or "?"

    @property
    def collateral(self) -> bool:
        return self.exitcode == -signal.SIGTERM  # torchrun's own shutdown of the surviving workers

    @property
    def text(self) -> str:
        if self.collateral:
            return f"stopped by its launcher with SIGTERM (exitcode {self.exitcode}) after another worker failed"
        if self.exitcode < 0:
            try:
                name = signal.Signals(-self.exitcode).name
            except ValueError:
                name = f"signal {-self.exitcode}"
            if self.oom_limit is not None:
                limit = "" if self.oom_limit == "?" else f", memory limit {self.oom_limit}"
                return (
                    f"out of memory: killed by {name} (exitcode {self.exitcode}) by the kernel's OOM killer"
                    f" (its node recorded an OOM kill in this attempt{limit})"
                )
            return f"killed by {name} (exitcode {self.exitcode}), as its launcher reported"
        return f"exited with status {self.exitcode}, as its launcher reported"


def oom_limit(event: OomKilled) -> str:
    """The memory limit an `oom` event recorded, for a failure's text ("?" when it recorded none)."""
    limit = event.limit_bytes
    return f"{limit / 2**20:.0f} MiB" if limit is not None else "?"


def launcher_failures(lines: list[str]) -> list[LauncherFailure]:
    """Every failed worker torchrun reported in these lines; the last report of a rank wins."""
    precise = _glog_times(lines)
    found: dict[int, LauncherFailure] = {}
    block: dict[str, tuple[str, int]] = {}
    for number, line in enumerate([*lines, "[0]:"], start=1):
        if _BLOCK.match(line):
            if (failure := _from_block(block, precise)) is not None:
                found[failure.rank] = failure
            block = {}
        elif match := _FIELD.match(line):
            block[match.group(1)] = (match.group(2).strip(), number)
    return [found[rank] for rank in sorted(found)]


def _from_block(block: dict[str, tuple[str, int]], precise: dict[str, tuple[str, str]]) -> LauncherFailure | None:
    rank = _RANK.match(block.get("rank", ("", 0))[0])
    exit_match = _EXIT.match(block.get("exitcode", ("", 0))[0])
    if rank is None or exit_match is None or int(exit_match.group(1)) == 0:
        return None
    stamp = block.get("time", ("", 0))[0]
    when = _epoch(stamp, precise.get(exit_match.group(2) or ""))
    return LauncherFailure(int(rank.group(1)), int(exit_match.group(1)), block["rank"][1], when)


def _glog_times(lines: list[str]) -> dict[str, tuple[str, str]]:
    """pid -> (MMDD, HH:MM:SS.ffffff) of torchrun's "failed (exitcode: ...)" lines."""
    out: dict[str, tuple[str, str]] = {}
    for line in lines:
        if match := _GLOG_FAILED.match(line):
            month, day, hour, minute, second, frac, pid = match.groups()
            out[pid] = (f"{month}{day}", f"{hour}:{minute}:{second}{frac or ''}")
    return out


def _epoch(stamp: str, glog: tuple[str, str] | None) -> float | None:
    """The report's "YYYY-MM-DD_HH:MM:SS" (local time), refined by the glog line's fraction of a second when it
    names the same second."""
    try:
        whole = time.mktime(time.strptime(stamp, "%Y-%m-%d_%H:%M:%S"))
    except (ValueError, OverflowError):
        return None
    if glog is not None and stamp[5:7] + stamp[8:10] == glog[0] and stamp[11:] == glog[1][:8]:
        return whole + float("0" + glog[1][8:]) if glog[1][8:] else whole
    return whole
