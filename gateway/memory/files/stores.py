"""Every guarded store of the memory, built in one place.

``Stores`` is where a ``MemoryStore`` is made with the configured limits (``memory.max_file_bytes``):
one per scope (``store_for``, ``for_user``, ``for_channel``, ``for_persona``), kept for the life of the
process, each reporting its guarded writes to the subscribers (``subscribe``). The index queue is one
subscriber (it re-indexes what was written); whatever else must hear of a write (the file watcher's
own-write filter, a bookkeeping writer) subscribes the same way instead of building a second store
around the same root.

``unwatched(root)`` is the same store for a root that is not (or not yet) a scope's, or for a tool that
runs without a gateway (the CLI, a merge, an import): the same limits, writes reported to no
subscriber, and to ``on_write`` when one is given.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from gateway.memory.files.scopes import channel_scope, known_scopes, root_for, user_scope
from gateway.memory.files.store import MemoryStore
from gateway.memory.settings import MemoryConfig

log = logging.getLogger(__name__)

# Told of each guarded write as (scope, file). Stores may write in any thread (writes often run in
# ``asyncio.to_thread``): a subscriber must be thread-safe and quick.
OnWrite = Callable[[str, str], None]


class Configured(Protocol):
    """What a store needs of the config (``gateway.config.Config`` has it; the files layer does not
    import the host's config)."""

    @property
    def data_dir(self) -> Path: ...

    @property
    def memory(self) -> MemoryConfig: ...


class Stores:
    def __init__(self, data_dir: Path | str, *, max_file_bytes: int, max_dir_files: int = 10_000) -> None:
        self.data_dir = Path(data_dir)
        self.max_file_bytes = max_file_bytes
        self.max_dir_files = max_dir_files
        self._stores: dict[str, MemoryStore] = {}
        self._subscribers: list[OnWrite] = []

    @classmethod
    def of(cls, config: Configured) -> Stores:
        """The stores of a config's data directory, with its limits (a tool without a gateway)."""
        return cls(config.data_dir, max_file_bytes=config.memory.max_file_bytes,
                   max_dir_files=config.memory.max_dir_files)

    def subscribe(self, on_write: OnWrite) -> None:
        """``on_write(scope, rel)`` after every guarded write of every scope's store."""
        self._subscribers.append(on_write)

    def _written(self, scope: str, rel: str) -> None:
        for subscriber in list(self._subscribers):
            try:
                subscriber(scope, rel)
            except Exception:  # one subscriber's failure must not keep the write from the others
                log.exception("memory: a write subscriber failed for %s of %s", rel, scope)

    # ------------------------------------------------------------------------------ per scope

    def root_for(self, scope: str) -> Path:
        """The directory of ``scope`` (``ScopeError`` for a scope that names none)."""
        return root_for(self.data_dir, scope)

    def store_for(self, scope: str) -> MemoryStore:
        if scope not in self._stores:
            self._stores[scope] = MemoryStore(
                self.root_for(scope), max_file_bytes=self.max_file_bytes, max_dir_files=self.max_dir_files,
                on_write=lambda rel, scope=scope: self._written(scope, rel),
            )
        return self._stores[scope]

    def for_user(self, user_id: str) -> MemoryStore:
        return self.store_for(user_scope(user_id))

    def for_channel(self, key: str) -> MemoryStore:
        """``key`` is a conversation key like ``telegram:-100123``."""
        return self.store_for(channel_scope(key))

    def for_persona(self, name: str) -> MemoryStore:
        return self.store_for(f"persona:{name}")

    def known_scopes(self) -> list[str]:
        return known_scopes(self.data_dir)

    def forget(self, scope: str) -> None:
        """Let go of a scope's store (its root was merged away or erased): a later ``store_for`` makes a
        fresh one instead of writing through a store whose directory is gone."""
        self._stores.pop(scope, None)

    # ---------------------------------------------------------------------------- any root

    def unwatched(
        self, root: Path, *, on_write: Callable[[str], None] | None = None, audit_path: Path | None = None
    ) -> MemoryStore:
        """A store on ``root`` with the configured limits whose writes no subscriber hears of."""
        return MemoryStore(root, max_file_bytes=self.max_file_bytes, max_dir_files=self.max_dir_files,
                           on_write=on_write, audit_path=audit_path)
