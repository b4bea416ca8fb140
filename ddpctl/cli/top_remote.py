"""The live `ddpctl top --cluster NAME [JOB]` (or `top JOB` of a job submitted from here to a cluster): each
interval the cluster's ddpctl is asked for one frame's facts (`top --once --json`, over the cluster's shared
connection) and they are drawn here by the local renderer (ddpctl.cli.top_render), every text made visible
(ddpctl.health.topjson). A dropped or unreachable connection is one line under the last frame and the next
interval asks again; the cluster's own error (no such job) ends it as one line. Ends when the job ends.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ddpctl.errors import RemoteError

MIN_INTERVAL_S = 1.0  # each frame is an ssh round trip and a ddpctl start there (which asks its scheduler)
ASK_TIMEOUT_S = 20.0  # a connection that hangs is a notice after this long, then asked again
AGAIN = ("dropped", "unreachable", "timeout", "other")  # ssh's failures worth asking again (ddpctl.remote.ssh)


def asked_again(err: RemoteError) -> bool:
    """Whether a failed ask is shown as a notice and asked again (the connection's failure), or ends `top`
    (the cluster's ddpctl said no, or ssh refused a host key or the login: asking again changes nothing)."""
    return err.kind in AGAIN


def ask(cluster: str, words: list[str]) -> dict[str, Any]:
    from ddpctl import __version__
    from ddpctl.remote.passthrough import run_remote

    data = json.loads(run_remote(cluster, words, __version__, as_json=True, timeout=ASK_TIMEOUT_S).out)
    assert isinstance(data, dict)  # run_remote answers a JSON object or raises
    return data


def live(cluster: str, words: list[str], interval: float) -> int:
    from rich.console import Console, Group, RenderableType
    from rich.live import Live
    from rich.text import Text

    from ddpctl.cli.top_render import ended_line, frame

    console, pause = Console(), max(MIN_INTERVAL_S, interval)
    shown: tuple[Any, Any, dict[str, Any]] | None = None  # the newest frame the cluster gave
    try:
        with Live(console=console, auto_refresh=False, screen=False, transient=False) as screen:
            while True:
                notice = None
                try:
                    shown = read_frame(ask(cluster, words))
                except RemoteError as err:
                    if not asked_again(err):
                        raise
                    notice = f"asking again in {pause:g} s: {err}"  # the cause may be cut at the width
                parts: list[RenderableType] = [frame(*shown, console.size)] if shown else []
                parts += [Text(notice, style="yellow", overflow="ellipsis", no_wrap=True)] if notice else []
                screen.update(Group(*parts), refresh=True)
                if shown is not None and notice is None and shown[1].terminal:
                    break
                time.sleep(pause)
    except KeyboardInterrupt:
        return 130
    assert shown is not None  # the loop ends only on a frame of an ended job
    console.print(Text(ended_line(shown[0].job_id, shown[1])))  # Text: the cluster's reason is no markup
    return 0


def read_frame(data: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """(record, state, facts) for the renderer from the cluster's `top --once --json`, made visible."""
    from ddpctl.health.topjson import facts_of, state_of
    from ddpctl.run.registry import JobRecord
    from ddpctl.sanitize import visible

    record = JobRecord(visible(str(data.get("job_id")))[:80], visible(str(data.get("name")))[:80], "", "", 0.0)
    return record, state_of(data.get("state")), facts_of(data)
