"""Unified user namespace: (channel, account id) -> user id, operator links and user merges.

A user id names the person's memory tree ``users/<user_id>/``; it is random for people who first
appear in chat and chosen by the operator in ``identity_links``. Linking two accounts (``/link``, with
both accounts confirming: ``gateway.identity.linking``) merges the second account's user into the first:
identities, sessions and turns move over, and the memory tree is merged file by file through the
guarded store (``gateway.memory.files.treemerge``: Markdown logs are appended, never overwritten, and no
symlink in either tree is followed).
"""

from __future__ import annotations

import logging
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from gateway.identity.linking import LinkError, LinkRequests
from gateway.memory.files.treemerge import merge_tree
from gateway.state import State
from gateway.types import InboundMessage, UserRef

if TYPE_CHECKING:
    from gateway.config import Config

log = logging.getLogger("kith.identity")

__all__ = ["Identities", "LinkError", "new_user_id"]


def new_user_id() -> str:
    return "u" + secrets.token_hex(6)


class Identities:
    def __init__(self, state: State, config: Config) -> None:
        self.state = state
        self.config = config
        self.users_dir = Path(config.data_dir) / "users"
        self.links = LinkRequests(state, config)  # /link codes and the two-sided confirmation

    # --------------------------------------------------------------------------- resolution
    def lookup(self, channel: str, account_id: str) -> str | None:
        return self.state.identities.lookup(channel, account_id)

    def resolve(self, message: InboundMessage, *, create: bool = True) -> UserRef | None:
        found = self.state.identities.lookup_user(message.channel, message.account_id)
        if found is not None:
            user_id, user = found
        else:
            if not create:
                return None
            user_id = new_user_id()
            now = datetime.now(UTC)
            with self.state.tx():
                self.state.users.create(user_id, display_name=message.display_name, timezone=self.config.timezone,
                                        at=now)  # fmt: skip
                self.state.identities.add(message.channel, message.account_id, user_id,
                                          display_name=message.display_name, source="auto", at=now)  # fmt: skip
            user = self.state.users.get(user_id)
        return UserRef(
            user_id=user_id,
            display_name=(user.display_name if user else "") or message.display_name,
            timezone=user.timezone if user else self.config.timezone,
            tier=user.tier if user else None,
        )

    def accounts(self, user_id: str) -> list[tuple[str, str]]:
        return self.state.identities.accounts(user_id)

    # -------------------------------------------------------------------------- operator links
    def apply_config_links(self) -> None:
        """Make ``identity_links`` true in the state: each listed account belongs to its user."""
        for link in self.config.identity_links:
            self.state.users.ensure(link.user, display_name=link.user, timezone=self.config.timezone)
            for acct in link.accounts:
                channel, account_id = acct.split(":", 1)
                current = self.lookup(channel, account_id)
                if current == link.user:
                    continue
                if current is None:
                    self.state.identities.add(channel, account_id, link.user, source="config")
                else:
                    self.merge(into=link.user, source=current)

    # ---------------------------------------------------------------------------------- merge
    def merge(self, *, into: str, source: str) -> None:
        """Move everything of user ``source`` to user ``into`` and delete ``source``."""
        if into == source:
            return
        # Identities, sessions (and their scope), turns and conversations move; the source's open link
        # requests and the source itself go: one transaction.
        self.state.users.merge(into=into, source=source)
        # Two open sessions for one user would be ambiguous: keep the newest open.
        extra = self.state.sessions.open_ids(f"user:{into}")[1:]
        now = datetime.now(UTC)
        with self.state.tx():
            for session_id in extra:
                self.state.sessions.end(session_id, now)
        report = merge_tree(
            self.users_dir / source,
            self.users_dir / into,
            max_file_bytes=self.config.memory.max_file_bytes,
            label=source,
        )
        log.info(
            "merged user %s into %s: %d file(s)%s",
            source,
            into,
            len(report.merged),
            f", {len(report.failed)} left in users/{source}/ (see the error above)" if report.failed else "",
        )
