"""The chat commands that exist: what ``/help`` lists, and what makes a ``/word`` a command at all.

Plugins answer commands through ``gateway_handle_command``; they *declare* them here, through the
registration hook ``gateway_register_commands`` (``register("remember", "/remember TEXT: keep TEXT")``),
exactly as they register adapters, jobs and tools (``gateway/registry.py``). The declaration is what
``/help`` shows, in registration order; a command no hook answers is answered by the host as unknown
(``gateway.turn.commands.unknown``), never sent to the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gateway.registry import Registry
from gateway.types import StashKey

# What ``gateway.turn.protocol.parse_command`` accepts as a command name (lower case).
COMMAND_NAME = re.compile(r"^[a-z0-9_]{1,32}$")
MAX_HELP_CHARS = 500


@dataclass(frozen=True, slots=True)
class CommandHelp:
    """One command's ``/help`` text: one or more lines, each starting with its usage (``/name ...``)."""

    name: str
    text: str

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()


class CommandRegistry(Registry[CommandHelp]):
    """The ``register`` handed to ``gateway_register_commands``: ``register(name, help_text)``."""

    kind = "command"

    def __call__(self, name: str, help_text: str) -> None:
        if not isinstance(name, str) or not COMMAND_NAME.match(name):
            self.problem(f"command name {name!r} is not 1-32 of a-z, 0-9, '_'")
            return
        if not isinstance(help_text, str) or not help_text.strip() or len(help_text) > MAX_HELP_CHARS:
            self.problem(f"command /{name}: help text must be 1-{MAX_HELP_CHARS} characters")
            return
        lines = [line.strip() for line in help_text.strip().splitlines() if line.strip()]
        if not all(line.startswith("/") for line in lines):
            # /help reads as a list of usages; a line that is not one would read as another command's.
            self.problem(f"command /{name}: every help line starts with its usage ('/{name} ...')")
            return
        self.add(name, CommandHelp(name=name, text="\n".join(lines)))


#: What plugins registered, in the gateway's stash (set in ``Gateway.start``): modules typed against
#: ``gateway.services.Services`` read it here.
COMMANDS = StashKey[CommandRegistry]()
