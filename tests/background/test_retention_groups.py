"""Seed 004: group and channel memory have a retention setting of their own
(``background.retention.group_retention_days``; unset: the person's ``memory_retention_days``)."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.memory.background.settings import RetentionConfig
from tests.background.conftest import BgFactory, say

NOW = datetime(2024, 3, 10, 11, 0, tzinfo=UTC)
OLD = "memories/2024-02-01.md"


def test_unset_group_retention_follows_the_persons() -> None:
    assert RetentionConfig(memory_retention_days=30).group_days == 30
    assert RetentionConfig(memory_retention_days=30, group_retention_days=0).group_days == 0
    assert RetentionConfig(group_retention_days=7).group_days == 7


async def test_a_group_is_pruned_on_its_own_days_while_the_person_keeps_everything(bg_gateway: BgFactory) -> None:
    gw = await bg_gateway(background={"retention": {"memory_retention_days": 0, "group_retention_days": 7}})
    uid = await say(gw, "hello")
    await say(gw, "hello club", group="club")
    mine, room = gw.memory_store(uid), gw.memory.stores.for_channel("websocket:club")
    for store in (mine, room):
        store.write(OLD, "# Memories 2024-02-01\n\n- An old line.\n", source="test")
    await gw.bus.enqueue("retention", {"user_id": uid, "slot": "2024-03-10T12:15", "tz": "UTC",
                                       "scheduled_for": NOW.isoformat()}, job_id="retention-user")  # fmt: skip
    await gw.bus.enqueue("retention_groups", {"slot": "2024-03-10T12:15", "tz": "UTC",
                                              "scheduled_for": NOW.isoformat()}, job_id="retention-groups")  # fmt: skip
    await gw.settle()
    assert mine.exists(OLD)  # 0 days: the person's memory is kept forever
    assert not room.exists(OLD)  # 7 days for groups: the old day is gone
