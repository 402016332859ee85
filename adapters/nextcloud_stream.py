"""Streaming a reply into a Nextcloud Talk room by editing it (``gateway.delivery.stream``).

Talk's bot API can post and react but not edit, and its post answers no message id. Talk's chat API
can (capability ``edit-messages``, Talk 19 and later): ``POST /ocs/v2.php/apps/spreed/api/v1/chat/<room>``
answers the new message with its id, ``PUT .../chat/<room>/<id>`` edits it, ``DELETE`` the same path
deletes it. That API speaks for a user, so a streamed reply is written as ``api_user`` (basic auth with
its app password), not as the bot: which is why ``channels.nextcloud.stream`` is off unless asked for.

Talk sends every chat message in a room to its bots, the ones ``api_user`` writes too: ``OwnMessages``
remembers what the stream posted (the text while the post is under way, since the webhook may arrive
before the answer; the id after) so that kith does not take its own reply for a turn. Edits and
deletions reach bots as system messages, which are not turns anyway.
"""

from __future__ import annotations

import logging
import secrets
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import aiohttp

if TYPE_CHECKING:
    from adapters.nextcloud_talk import NextcloudTalkAdapter

log = logging.getLogger("kith.adapters.nextcloud")

OCS_CHAT = "/ocs/v2.php/apps/spreed/api/v1/chat"
OCS_CAPABILITIES = "/ocs/v2.php/cloud/capabilities"
EDIT_CAPABILITY = "edit-messages"
_REMEMBERED = 1000  # own message ids kept; a webhook comes within seconds of its post


class RetryLater(Exception):
    """Talk answered 429: wait ``seconds`` (its Retry-After, else 2 s) before the next call."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"429, retry after {seconds}s")
        self.seconds = seconds


def retry_after(exc: BaseException) -> float | None:
    return exc.seconds if isinstance(exc, RetryLater) else None


class OwnMessages:
    """What kith posted as ``api_user``, so that its webhook is not a turn."""

    def __init__(self) -> None:
        self._pending: dict[tuple[str, str], int] = {}
        self._ids: OrderedDict[str, None] = OrderedDict()

    def posting(self, room: str, text: str) -> None:
        self._pending[(room, text)] = self._pending.get((room, text), 0) + 1

    def posted(self, room: str, text: str, message_id: str | None) -> None:
        left = self._pending.get((room, text), 0) - 1
        if left > 0:
            self._pending[(room, text)] = left
        else:
            self._pending.pop((room, text), None)
        if message_id is not None:
            self._ids[f"{room}:{message_id}"] = None
            while len(self._ids) > _REMEMBERED:
                self._ids.popitem(last=False)

    def ours(self, room: str, message_id: str, text: str) -> bool:
        return f"{room}:{message_id}" in self._ids or (room, text) in self._pending


async def edits_supported(adapter: NextcloudTalkAdapter) -> bool:
    """Whether the server's Talk has ``edit-messages`` (asked once; a failed lookup is asked again
    next time and means no streaming meanwhile)."""
    auth = adapter._basic_auth()
    if auth is None:
        return False
    try:
        async with adapter._client().get(
            f"{adapter._base}{OCS_CAPABILITIES}",
            headers={"OCS-APIRequest": "true", "Accept": "application/json", "Authorization": auth},
        ) as resp:
            if resp.status != 200:
                log.warning("nextcloud: capabilities answered %d; replies are sent whole", resp.status)
                return False
            data = await resp.json(content_type=None)
        features = data["ocs"]["data"]["capabilities"]["spreed"]["features"]
    except (TimeoutError, aiohttp.ClientError, KeyError, TypeError, ValueError) as exc:
        log.warning("nextcloud: capabilities lookup failed (%s); replies are sent whole", type(exc).__name__)
        return False
    adapter._can_edit = isinstance(features, list) and EDIT_CAPABILITY in features
    if not adapter._can_edit:
        log.info("nextcloud: this Talk cannot edit messages (no %s); replies are sent whole", EDIT_CAPABILITY)
    return adapter._can_edit


class RoomTarget:
    """A room a reply streams into (``gateway.delivery.stream.MessageTarget``), through the chat API as
    ``api_user``. Handles are Talk message ids."""

    drafts = False

    def __init__(self, adapter: NextcloudTalkAdapter, room: str, reply_to: str) -> None:
        self._adapter, self._room, self._reply_to = adapter, room, reply_to

    async def _call(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        auth = self._adapter._basic_auth()
        if auth is None:
            raise RuntimeError("nextcloud: streaming needs api_user and api_password")
        await self._adapter._limiter.acquire(self._room)
        headers = {"OCS-APIRequest": "true", "Accept": "application/json", "Authorization": auth}
        url = f"{self._adapter._base}{OCS_CHAT}/{self._room}{path}"
        async with self._adapter._client().request(method, url, json=body, headers=headers) as resp:
            if resp.status == 429:
                raise RetryLater(float(resp.headers.get("Retry-After", "2") or 2))
            if resp.status >= 400:
                raise RuntimeError(f"nextcloud answered {resp.status} to {method} chat/{self._room}{path}: "
                                   f"{(await resp.text())[:200]}")
            self._adapter.touch()
            return await resp.json(content_type=None)

    async def post(self, text: str) -> int:
        body: dict[str, Any] = {"message": text, "referenceId": secrets.token_hex(32)}
        if self._reply_to.isdigit():
            body["replyTo"] = int(self._reply_to)
        self._reply_to = ""  # only the first message quotes the question
        own = self._adapter._own
        own.posting(self._room, text)
        message_id: str | None = None
        try:
            answer = await self._call("POST", "", body)
            message_id = str(int(answer["ocs"]["data"]["id"]))
        finally:
            own.posted(self._room, text, message_id)
        return int(message_id)

    async def edit(self, handle: int, text: str) -> None:
        await self._call("PUT", f"/{handle}", {"message": text})

    async def seal(self, handle: int | None, text: str) -> int:
        return await self.post(text)  # never called: no drafts on Talk

    async def delete(self, handle: int) -> None:
        await self._call("DELETE", f"/{handle}", None)
