"""Every conversation key names a channel root (``channel_scope``): a key whose encoded name is no
directory name (a Matrix room on a long server name; a preview's junk channel) gets a hashed one, and
every name the encoding gave before stays exactly as it was, so existing roots are found where they are."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from gateway.channels import CHANNEL_NAME
from gateway.memory.files.scopes import _ID, channel_scope, root_for

DATA = Path("/data")
LONG_MATRIX_ROOM = "matrix:!OGEhHVWSdvArJzumhm:" + "chat." * 24 + "example.org"  # a room id is up to 255 bytes


def _encoded(key: str) -> str:
    """The name as channel_scope gave it before any key could fall back (the rule existing roots follow)."""
    channel, _, conversation = key.partition(":")
    name = f"{channel}-{conversation}" if conversation else channel
    return quote(name, safe="-_.@+=").replace("%", "=")


def test_the_keys_the_old_rule_refused_name_a_root() -> None:
    for key in (LONG_MATRIX_ROOM, "$\\x:room", "été:room", "websocket:a..b", "slack:a~b", "x:\ud800"):
        scope = channel_scope(key)
        root = root_for(DATA, scope)  # raised ScopeError before
        assert root.parent == DATA / "channels" and scope.startswith("channel:X-"), (key, scope)
    assert "-matrix-=21OGEhHVWSdvArJzumhm=3Achatchat" in channel_scope(LONG_MATRIX_ROOM)  # a readable hint


def test_the_names_real_keys_had_are_kept() -> None:
    for key, name in (("telegram:-1001", "telegram--1001"), ("discord:1234567890", "discord-1234567890"),
                      ("matrix:!abc:example.org", "matrix-=21abc=3Aexample.org"),
                      ("signal:group:Zm9vYmFy/+=", "signal-group=3AZm9vYmFy=2F+="),
                      ("websocket:team-room", "websocket-team-room")):  # fmt: skip
        assert channel_scope(key) == f"channel:{name}"


@given(key=st.text(max_size=300))
def test_any_key_names_a_root_and_valid_names_do_not_move(key: str) -> None:
    scope = channel_scope(key)
    assert root_for(DATA, scope).parent == DATA / "channels"
    old = None if any("\ud800" <= ch <= "\udfff" for ch in key) else _encoded(key)
    if old is not None and _ID.match(old) and ".." not in old:
        assert scope == f"channel:{old}"
    else:
        assert scope.startswith("channel:X-")


@given(channel=st.from_regex(CHANNEL_NAME, fullmatch=True), conversation=st.text(max_size=300))
def test_a_hashed_name_never_meets_a_real_channels_encoded_name(channel: str, conversation: str) -> None:
    # Real channel names are lowercase: their encoded names never start with the hashed names' "X".
    scope = channel_scope(f"{channel}:{conversation}")
    assert scope.startswith(("channel:X-", f"channel:{channel}"))


@given(keys=st.lists(st.text(max_size=200).map(lambda s: "$" + s), min_size=2, max_size=20, unique=True))
def test_hashed_names_are_one_per_key(keys: list[str]) -> None:
    scopes = [channel_scope(k) for k in keys]
    assert all(s.startswith("channel:X-") for s in scopes)
    assert len(set(scopes)) == len(keys)
