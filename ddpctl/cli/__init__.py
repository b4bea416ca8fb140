# PYTHON_ARGCOMPLETE_OK  (argcomplete: this entry point answers completion requests)
"""`ddpctl` command line: one module per subcommand, each with add(subparsers) and a handler.

Only this function catches DdpctlError: a user mistake prints one line and exits with its code; so does an
OSError from the filesystem (one line naming the path, exit 2); anything else is a bug and keeps its traceback.
Command modules import torch/rich/submitit lazily inside their handlers.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from ddpctl import __version__
from ddpctl.cli.common import RESULTS
from ddpctl.cli.completion import autocomplete
from ddpctl.errors import DdpctlError
from ddpctl.exitcodes import USAGE

# Order is the order shown in --help.
COMMAND_MODULES = (
    "submit",
    "sweep",
    "status",
    "top",
    "scale",
    "report",
    "watch",
    "jobs",
    "prune",
    "logs",
    "preempt",
    "doctor",
    "clusters",
    "render",
    "env",
    "launch",
    "internal",
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; with `only` (a command name), just that command's subparser: every node's launcher
    starts through this, and importing and building the other commands would cost each start for nothing."""
    parser = argparse.ArgumentParser(
        prog="ddpctl",
        description="Run PyTorch DDP training on Slurm (or locally) and keep it running.",
    )
    parser.add_argument("--version", action="version", version=f"ddpctl {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES if only is None else (only,):
        importlib.import_module(f"ddpctl.cli.{name}").add(sub)
    return parser


def command_named(argv: Sequence[str]) -> str | None:
    """The command `argv` names in its first word, if that is one; None where the whole parser is needed
    (no command, `--help`, a misspelling that argparse should answer with the list, a completion request)."""
    if argv and argv[0] in COMMAND_MODULES and "_ARGCOMPLETE" not in os.environ:
        return argv[0]
    if argv and argv[0] == RESULTS and "_ARGCOMPLETE" not in os.environ:
        return "sweep"  # its module adds both
    return None


def unknown_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> str | None:
    """argparse's own answer lists every subparser, the hidden ones too (`internal`, `sweep-results`): this one
    names the commands a user types, and the nearest of them."""
    if not argv or argv[0].startswith("-") or argv[0] in COMMAND_MODULES or argv[0] == RESULTS:
        return None
    from ddpctl.cli.completion import HIDDEN

    choices = next(a.choices for a in parser._subparsers._group_actions if a.choices) if parser._subparsers else {}
    shown = [name for name in choices or {} if name not in HIDDEN]
    if argv[0] in shown:
        return None
    import difflib  # here: only a mistyped command needs it, and every command would pay its import

    guess = difflib.get_close_matches(argv[0], shown, n=1)
    hint = f"; did you mean {guess[0]!r}?" if guess else ""
    return f"unknown command {argv[0]!r} (commands: {', '.join(shown)}){hint}"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["sweep", "results"]:  # two words, one command: sweep's SPEC would otherwise take "results"
        argv[:2] = [RESULTS]
    parser = build_parser(command_named(argv))
    autocomplete(parser)  # a shell asking for completions gets them here, and the process ends
    if (unknown := unknown_command(parser, argv)) is not None:
        parser.error(unknown)  # usage and one line, exit status 2, as argparse's own
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # here, so a closed pipe surfaces below rather than at interpreter exit
        return code
    except BrokenPipeError:
        # The reader went away (`ddpctl status | head -1`): stop quietly, like other Unix tools.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except DdpctlError as err:
        print(f"ddpctl: error: {err}", file=sys.stderr)
        return err.exit_code
    except OSError as err:
        # The filesystem refused (read-only run_dir or DDPCTL_HOME, a file where a directory should be, a
        # symlink in a run dir): the user's environment, not a bug, so one line naming the path.
        from ddpctl.safeio import describe

        print(f"ddpctl: error: {describe(err)}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        return 130
