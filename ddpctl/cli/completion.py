"""Shell completion through argcomplete: commands and options from the parser, spec keys after `--set`, job
names and ids from the registry.

argcomplete is imported only when a shell asks for completions (`_ARGCOMPLETE` set), so a normal run pays
nothing. Enable it with `eval "$(register-python-argcomplete ddpctl)"` (README).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

Completer = Callable[..., list[str]]
MAX_REFS = 500  # job names and ids offered for one TAB
# Commands no user types: the node side's `internal`, and `sweep-results`, which `sweep results` becomes.
HIDDEN = ("internal", "sweep-results")


def complete_set(prefix: str, **_: Any) -> list[str]:
    """`--set` words: `key=` (no space after it), then, for keys with fixed values, `key=value`."""
    from ddpctl.spec.overrides import key_choices, spec_keys

    key, eq, value = prefix.partition("=")
    if eq:
        return [f"{key}={choice}" for choice in key_choices(key) if choice.startswith(value)]
    return [f"{name}=" for name in [*spec_keys(), "env.", "sbatch."] if name.startswith(prefix)]


def complete_spec(words: tuple[str, ...], prefix: str, **kwargs: Any) -> list[str]:
    """A spec file, or one of `words` (`sweep results`): files as the shell would complete them."""
    from argcomplete.completers import FilesCompleter

    return [word for word in words if word.startswith(prefix)] + list(FilesCompleter()(prefix, **kwargs))


def job_refs(prefix: str, **_: Any) -> list[str]:
    """Names and ids of the jobs in the registry that start with `prefix`, newest first, at most MAX_REFS of them.

    Read from the registry's end only as far as it takes (every TAB asks), and bounded: argcomplete
    de-duplicates what a completer returns with a list-membership test (quadratic: 20,000 candidates cost
    seconds), and no shell lists more usefully; a longer prefix finds the older ones."""
    from ddpctl.run.registry import Registry

    return Registry.from_env().newest_refs(prefix, MAX_REFS)


def complete_with(action: argparse.Action, completer: Completer) -> argparse.Action:
    """Attach a completer where argcomplete looks for it (the action's `completer` attribute)."""
    setattr(action, "completer", completer)  # noqa: B010 - argparse.Action has no such field in its stubs
    return action


def autocomplete(parser: argparse.ArgumentParser) -> None:
    """Answer a completion request and exit, when the shell made one; otherwise do nothing."""
    if "_ARGCOMPLETE" in os.environ:
        import argcomplete

        argcomplete.autocomplete(parser, exclude=list(HIDDEN))
