"""Who may call ``/v1``: per-person API keys only (on loopback too), made, listed and revoked by
``kith users api-key``, gone with their person; one person's key never reaches another's memory."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
import openai
import pytest
import yaml

from gateway.cli.main import main
from gateway.http.api_keys import key_hash
from gateway.http.auth import read_operator_token
from gateway.testing import message
from tests.fakes.anthropic import FakeAnthropic
from tests.openai_compat.conftest import Start, client, person, turn_texts

HI = [{"role": "user", "content": "hi"}]


async def test_a_wrong_or_missing_key_is_401_in_openais_shape(start: Start) -> None:
    gw = await start()
    key = person(gw, "ada", "Ada")
    for wrong in ("sk-nope", key[:-1] + ("A" if key[-1] != "A" else "B"), "sk-kith-000000000000-" + "x" * 43):
        with pytest.raises(openai.AuthenticationError) as caught:
            await client(gw, wrong).chat.completions.create(model="kith", messages=HI)  # type: ignore[arg-type]
        assert caught.value.status_code == 401
        assert isinstance(caught.value.body, dict) and caught.value.body["code"] == "invalid_api_key"
    base = f"http://127.0.0.1:{gw.port}/v1"
    operator = read_operator_token(gw.config)
    async with aiohttp.ClientSession() as http:
        # No key on loopback: refused (secure by default); the operator token is not a key either.
        for headers in ({}, {"Authorization": f"Bearer {operator}"}):
            async with http.post(f"{base}/chat/completions", json={"model": "kith", "messages": HI},
                                 headers=headers) as resp:  # fmt: skip
                assert resp.status == 401
                assert (await resp.json())["error"]["type"] == "invalid_request_error"
            async with http.get(f"{base}/models", headers=headers) as resp:
                assert resp.status == 401
    assert gw.state.turns.last_seq() == 0  # nothing of those reached a turn


async def test_the_database_holds_only_a_hash_of_the_key(start: Start) -> None:
    gw = await start()
    key = person(gw, "ada", "Ada")
    # The database and its write-ahead log, as they are on disk. The log is read first: a checkpoint
    # copies its pages into the database before the log is reused, so whatever a checkpoint does
    # between the two reads, the hash is in one of them (read the other way round, a checkpoint in
    # between could hide it from both).
    data = Path(gw.config.data_dir)
    raw = b"".join(p.read_bytes() for p in (data / "state.sqlite-wal", data / "state.sqlite")
                   if p.exists())  # fmt: skip
    secret = key.split("-", 3)[3]  # the secret itself may hold a "-" (URL-safe base64)
    assert len(secret) == 43
    assert secret.encode() not in raw and key_hash(key).encode() in raw


async def test_a_revoked_key_and_the_key_of_a_deleted_person_stop_at_once(start: Start) -> None:
    gw = await start()
    key, other = person(gw, "ada", "Ada"), person(gw, "ada", "Ada")
    assert (await client(gw, key).models.list()).data
    assert gw.state.api_keys.revoke("ada", key.split("-")[2]) == 1
    with pytest.raises(openai.AuthenticationError):
        await client(gw, key).models.list()
    assert (await client(gw, other).models.list()).data  # her other key still works
    gw.state.people.erase_user("ada")
    assert gw.state.api_keys.of_user("ada") == []
    with pytest.raises(openai.AuthenticationError):
        await client(gw, other).chat.completions.create(model="kith", messages=HI)  # type: ignore[arg-type]
    assert gw.state.users.get("ada") is None  # the refused key did not bring her back


async def test_another_persons_key_never_sees_the_first_persons_memory(
    start: Start, fake_anthropic: FakeAnthropic
) -> None:
    gw = await start()
    ada, bob = client(gw, person(gw, "ada", "Ada")), client(gw, person(gw, "bob", "Bob"))
    await ada.chat.completions.create(model="kith", messages=[  # type: ignore[arg-type]
        {"role": "user", "content": "remember: my bank PIN is CANARY-7731"}])
    await gw.settle()
    # Bob names Ada's conversation and Ada's user as well as he can: his key still speaks only for him.
    ada_key = gw.state.api_keys.of_user("ada")[0].key_id
    await bob.chat.completions.create(model="kith", user="ada",  # type: ignore[arg-type]
                                      messages=[{"role": "user", "content": "what is the bank PIN?"}],
                                      extra_headers={"X-Kith-Conversation": ada_key})  # fmt: skip
    assert "what is the bank PIN?" in turn_texts(fake_anthropic)
    assert "CANARY-7731" not in turn_texts(fake_anthropic)
    bob_session = gw.state.sessions.open_in("user:bob")
    assert bob_session is not None and bob_session.user_id == "bob"
    assert all("CANARY" not in r.content for r in gw.state.turns.after(bob_session.session_id))


async def test_a_key_follows_its_person_through_a_merge(start: Start, fake_anthropic: FakeAnthropic) -> None:
    gw = await start()
    key = person(gw, "ada2", "Ada")
    await gw.handle_inbound(message("hello from the browser", account="ada-browser"))
    browser_user = gw.identities.lookup("websocket", "ada-browser")
    assert browser_user is not None
    await gw.merge_users(into=browser_user, source="ada2")
    assert [k.user_id for k in gw.state.api_keys.of_user(browser_user)] == [browser_user]
    await client(gw, key).chat.completions.create(model="kith", messages=HI)  # type: ignore[arg-type]
    assert "hello from the browser" in turn_texts(fake_anthropic)


def test_kith_users_api_key_makes_lists_and_revokes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gateway.http.api_keys import authenticate
    from gateway.state import open_state

    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data"), "llm": {"provider": "echo"},
                                      "plugins": {"entry_points": False}, "server": {"port": 0}}))  # fmt: skip
    (tmp_path / "data").mkdir()
    state = open_state(tmp_path / "data" / "state.sqlite")
    state.users.create("ada", display_name="Ada", timezone="UTC")
    state.close()
    assert main(["-c", str(config), "users", "api-key", "nobody"]) == 2
    capsys.readouterr()
    assert main(["-c", str(config), "users", "api-key", "Ada", "--label", "open webui"]) == 0
    out = capsys.readouterr()
    key = out.out.strip()
    assert key.startswith("sk-kith-") and "shown once" in out.err
    assert main(["-c", str(config), "users", "api-key", "ada", "--list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [k["label"] for k in listed["keys"]] == ["open webui"] and key not in json.dumps(listed)
    state = open_state(tmp_path / "data" / "state.sqlite")
    try:
        found = authenticate(state, key)
        assert found is not None and found.user_id == "ada"
        assert state.identities.lookup("openai", "ada") == "ada"
    finally:
        state.close()
    assert main(["-c", str(config), "users", "api-key", "ada", "--revoke", "ffffffffffff"]) == 2
    assert main(["-c", str(config), "users", "api-key", "ada", "--revoke"]) == 0
    assert "revoked 1 API key of ada" in capsys.readouterr().out
    state = open_state(tmp_path / "data" / "state.sqlite")
    try:
        assert authenticate(state, key) is None
    finally:
        state.close()


async def test_a_key_made_by_the_cli_works_on_the_running_daemon_at_once(
    start: Start, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gw = await start()
    gw.state.users.ensure("ada", display_name="Ada", timezone="UTC")
    config = tmp_path / "kith.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(gw.config.data_dir), "llm": {"provider": "echo"},
                                      "plugins": {"entry_points": False}, "server": {"port": 0}}))  # fmt: skip
    assert await asyncio.to_thread(main, ["-c", str(config), "users", "api-key", "ada"]) == 0
    key = capsys.readouterr().out.strip()
    assert [m.id for m in (await client(gw, key).models.list()).data] == ["kith"]
    assert await asyncio.to_thread(main, ["-c", str(config), "users", "api-key", "ada", "--revoke"]) == 0
    with pytest.raises(openai.AuthenticationError):
        await client(gw, key).models.list()
