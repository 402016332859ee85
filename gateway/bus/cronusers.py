"""Users as the cron scheduler reads them: by timezone, a page at a time, and the ones added lately.

The scheduler runs every minute, but a per-user job is due only when its slot moves in some
timezone, and a user needs a look only then or when they are new. So instead of every user every
minute it asks for the distinct timezones (a few index seeks), the users of a zone whose slot just
moved (pages), and the users added since its last tick. ``State.users`` (``gateway.state``) is the
directory of a running daemon; ``ListedUsers`` adapts a provider that returns every ``(user id,
timezone)`` pair (tests, plugins, small embeddings), at the old cost of reading them all.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

#: Where a user was added: (creation stamp, user id), ordered. Users are read "since" a position.
Position = tuple[str, str]


@runtime_checkable
class UserDirectory(Protocol):
    def user_timezones(self) -> list[str]:
        """The distinct timezone names users have (raw: unknown names too)."""
        ...

    def users_in_timezone(self, timezone: str, *, after: str = "", limit: int = 500) -> list[str]:
        """User ids in ``timezone`` greater than ``after``, in id order, at most ``limit``."""
        ...

    def users_added_since(self, position: Position, *, limit: int = 500) -> list[tuple[Position, str]]:
        """(position, timezone) of users added after ``position``, oldest first, at most ``limit``."""
        ...

    def newest_user_position(self) -> Position:
        """The position of the user added last (``("", "")`` when there is none)."""
        ...


class ListedUsers:
    """A ``UserDirectory`` over a full list of (user id, timezone) pairs.

    ``positions`` is kept by the caller across calls: a user gets the next position the first time
    a list contains it, so "added since" means "not in any earlier list".
    """

    def __init__(self, users: Iterable[tuple[str, str]], positions: dict[str, int]) -> None:
        zones: dict[str, list[str]] = defaultdict(list)
        added: list[tuple[Position, str]] = []
        for user_id, tz in users:
            n = positions.setdefault(user_id, len(positions) + 1)
            zones[tz].append(user_id)
            added.append(((f"{n:012d}", user_id), tz))
        for ids in zones.values():
            ids.sort()
        added.sort()
        self._zones, self._added = dict(zones), added

    def user_timezones(self) -> list[str]:
        return sorted(self._zones)

    def users_in_timezone(self, timezone: str, *, after: str = "", limit: int = 500) -> list[str]:
        ids = self._zones.get(timezone, [])
        start = bisect.bisect_right(ids, after)
        return ids[start : start + limit]

    def users_added_since(self, position: Position, *, limit: int = 500) -> list[tuple[Position, str]]:
        start = bisect.bisect_right(self._added, (position, "\U0010ffff"))
        return self._added[start : start + limit]

    def newest_user_position(self) -> Position:
        return self._added[-1][0] if self._added else ("", "")
