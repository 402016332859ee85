"""Seed 004: the recall filters of ``kith memory search`` (topic, entity, since) in ``/api`` recall."""

from __future__ import annotations

from typing import Any

from gateway.testing import ConfigFactory
from tests.api.rig import person, signed_in
from tests.signin.rig import daemon


async def test_api_recall_filters_on_topic_entity_and_since(kith_config: ConfigFactory) -> None:
    async with daemon(kith_config()) as gw:
        alice = await person(gw, "alice")
        store = gw.memory_store(alice)
        store.write("memories/2024-05-01.md", "# M\n\n## Night\nTopics: moving\nEntities: Hanna\n\n"
                    "- Hanna helps with the flat in Munich.\n", source="test")
        store.write("memories/2024-05-03.md", "# M\n\n## Night\nTopics: cooking\nEntities: Sam\n\n"
                    "- Dinner with Sam, Munich style.\n", source="test")
        await gw.settle()
        client = await signed_in(gw, alice)
        try:
            await _check(client)
        finally:
            await client.close()


async def _check(client: Any) -> None:
    for query, expect in (("", {"memories/2024-05-01.md", "memories/2024-05-03.md"}),
                          ("&topic=cooking", {"memories/2024-05-03.md"}),
                          ("&entity=Hanna", {"memories/2024-05-01.md"}),
                          ("&since=2024-05-02", {"memories/2024-05-03.md"})):
        status, out = await client.get(f"/api/users/me/recall?q=Munich&k=5{query}")
        # (the turn that made Alice is in today's session log: dated, but of no topic or entity)
        assert status == 200 and {h["path"] for h in out["hits"] if h["path"].startswith("memories/")} == expect
        assert query in ("", "&since=2024-05-02") or all(h["path"].startswith("memories/") for h in out["hits"])
    status, out = await client.get("/api/users/me/recall?q=Munich&entity=sam")
    assert out["hits"][0]["topic"] == "cooking" and out["hits"][0]["entities"] == ["sam"]
    status, err = await client.get("/api/users/me/recall?q=Munich&since=yesterday")
    assert status == 400, err
