"""The pigeon adapter: a webhook takes a signed post in, replies land in ``delivered`` (the "loft")."""

from __future__ import annotations

import asyncio
import hmac
import json
from typing import TYPE_CHECKING, Any, ClassVar

from aiohttp import web

from gateway.adapter import Adapter, AdapterRegistry
from gateway.hookspecs import hookimpl
from gateway.types import ConversationAddress, InboundMessage, Reply
from tests.channels.kith_pigeon.config import PigeonConfig

if TYPE_CHECKING:
    from gateway.config import Config
    from gateway.services import Services


class PigeonAdapter(Adapter):
    name: ClassVar[str] = "pigeon"

    def __init__(self, gateway: Services, config: PigeonConfig | None = None) -> None:
        cfg = config if config is not None else gateway.config.channels.section("pigeon", PigeonConfig)
        super().__init__(gateway, cfg)
        self.cfg = cfg
        self.max_message_chars = cfg.max_text_chars  # type: ignore[misc]  # per instance, from its config
        self.delivered: list[tuple[str, str]] = []  # (conversation, text): what reached the loft

    async def run(self) -> None:
        self.mark_connected()
        await asyncio.Event().wait()  # the webhook does the work; serve until cancelled

    async def send(self, address: ConversationAddress, reply: Reply) -> None:
        self.delivered.extend((address.conversation_id, chunk) for chunk in self.reply_chunks(reply))

    def routes(self) -> list[web.RouteDef]:
        return [web.post(self.cfg.webhook_path, self._post)]

    async def _post(self, request: web.Request) -> web.Response:
        secret = self.cfg.secret.get_secret_value() if self.cfg.secret else ""
        if not secret or not hmac.compare_digest(request.headers.get("X-Pigeon-Secret", ""), secret):
            return web.json_response({"error": "unsigned"}, status=401)
        body: dict[str, Any] = json.loads(await request.text())  # the loft posts JSON as text/plain
        sender = str(body["from"])
        message = InboundMessage(channel=self.name, account_id=sender, conversation_id=sender,
                                 text=str(body["text"]), display_name=sender.title())  # fmt: skip
        reply = await self.gateway.handle_inbound(message)
        if reply is not None:
            await self.send(ConversationAddress(channel=self.name, conversation_id=sender), reply)
        return web.json_response({"ok": True})


@hookimpl
def gateway_register_adapters(register: AdapterRegistry, config: Config) -> None:
    register(PigeonAdapter)
