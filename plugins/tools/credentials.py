"""A person's credentials for the services tools reach (a CalDAV account), encrypted at rest.

One Fernet key (AES-128-CBC + HMAC-SHA256, ``cryptography``) per data dir in ``<data_dir>/secrets.key``,
mode 0600, made on first use; each secret in ``<data_dir>/users/<user_id>/.credentials/<name>.enc``,
mode 0600. The dot folder is reserved in the person's root (the guarded memory store never lists,
reads, indexes or exports a dot name), and it goes with the root when ``kith users delete`` erases
the person. The plain values exist only in memory, when a tool needs them; nothing here logs them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Container
from pathlib import Path
from typing import Any

from gateway.types import ConversationKind, Reply, Turn
from gateway.util.secretbox import data_dir_fernet, write_private

FOLDER = ".credentials"
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_USER = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


class CredentialError(Exception):
    pass


class CredentialStore:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)

    def _fernet(self) -> Any:
        return data_dir_fernet(self.data_dir)

    def _path(self, user_id: str, name: str) -> Path:
        if not _USER.match(user_id) or not _NAME.match(name):
            raise CredentialError("bad user id or credential name")
        return self.data_dir / "users" / user_id / FOLDER / f"{name}.enc"

    def put(self, user_id: str, name: str, values: dict[str, str]) -> None:
        token = self._fernet().encrypt(json.dumps(values).encode())
        write_private(self._path(user_id, name), token)

    def get(self, user_id: str, name: str) -> dict[str, str] | None:
        path = self._path(user_id, name)
        try:
            token = path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None
        from cryptography.fernet import InvalidToken

        try:
            values = json.loads(self._fernet().decrypt(token))
        except (InvalidToken, ValueError) as exc:
            raise CredentialError(f"the stored {name} credentials cannot be read (another key?)") from exc
        return values if isinstance(values, dict) else None

    def has(self, user_id: str, name: str) -> bool:
        try:
            return self._path(user_id, name).is_file()
        except CredentialError:
            return False

    def delete(self, user_id: str, name: str) -> bool:
        try:
            self._path(user_id, name).unlink()
        except FileNotFoundError:
            return False
        return True


def account_command(store: CredentialStore, user_id: str, name: str, parts: list[str], *, noun: str,
                    help_text: str) -> str | None:  # fmt: skip
    """The part ``/calendar`` and ``/mail`` share: the state without arguments, and ``disconnect``.
    None for anything else (``connect`` is each tool's own)."""
    if not parts:
        state = "connected" if store.has(user_id, name) else "not connected"
        return f"Your {noun} is {state}.\n{help_text}"
    if parts[0] == "disconnect":
        gone = store.delete(user_id, name)
        return f"{noun.capitalize()} disconnected; its password is deleted." if gone else f"No {noun} was connected."
    return None


def connect_words(store: CredentialStore, turn: Turn, args: str, *, enabled: bool, tools: str, name: str,
                  noun: str, help_text: str, words: Container[int]) -> Reply | list[str]:  # fmt: skip
    """What ``/calendar`` and ``/mail`` do before connecting: the tools must be on, the state and
    ``disconnect`` are answered (``account_command``), a connect needs ``words`` words (with
    ``connect``) and a direct conversation (a password said in a group is burnt). The answer as a
    Reply, or the words of a connect to try."""
    assert turn.user is not None
    if not enabled:
        return Reply(text=f"The {tools} tools are not enabled on this assistant.", notice=True)
    parts = args.split()
    answer = account_command(store, turn.user.user_id, name, parts, noun=noun, help_text=help_text)
    if answer is not None:
        return Reply(text=answer, notice=True)
    if parts[0] != "connect" or len(parts) not in words:
        return Reply(text=help_text, notice=True)
    if turn.message.kind is ConversationKind.GROUP:
        return Reply(text=f"Connect a {noun} only in a direct conversation with me; change that password now, "
                          "the group has seen it.", notice=True)
    return parts
