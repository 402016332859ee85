"""The ``gateway_prepare_message`` hook: its answer replaces the message in the transcript and the
prompt (images and attached text for this message only), or answers without the model and without
recording anything."""

from __future__ import annotations

from typing import Any

from gateway.hookspecs import hookimpl
from gateway.testing import GatewayFactory, message
from gateway.types import ImagePart, LLMRequest, PreparedMessage, Reply, Turn


class Prep:
    __name__ = "prep"

    def __init__(self) -> None:
        self.requests: list[LLMRequest] = []

    @hookimpl
    def gateway_prepare_message(self, turn: Turn) -> PreparedMessage | Reply | None:
        if turn.message.text == "refuse":
            return Reply(text="no thanks", notice=True)
        if turn.message.text == "swap":
            return PreparedMessage(text="swapped", attached="extra data",
                                   images=(ImagePart(mime_type="image/png", data=b"png", name="p.png"),))
        return None

    @hookimpl
    def gateway_before_llm_call(self, request: LLMRequest) -> Any:
        self.requests.append(request)
        return None


async def test_prepared_message_replaces_the_text_and_adds_images_for_this_message_only(
    make_gateway: GatewayFactory,
) -> None:
    prep = Prep()
    gw = await make_gateway(plugins=(prep,))
    reply = await gw.handle_inbound(message("swap"))
    assert reply is not None and not reply.notice
    current = prep.requests[-1].messages[-1]
    assert current.content == "swapped\n\nextra data"
    assert [i.name for i in current.images] == ["p.png"]
    await gw.handle_inbound(message("next"))
    earlier = [m for m in prep.requests[-1].messages if m.role == "user"]
    assert [m.content for m in earlier] == ["swapped", "next"], "the transcript keeps the prepared text"
    assert all(not m.images for m in earlier), "images go with their own message only"


async def test_a_reply_answers_without_the_model_and_records_nothing(make_gateway: GatewayFactory) -> None:
    prep = Prep()
    gw = await make_gateway(plugins=(prep,))
    reply = await gw.handle_inbound(message("refuse"))
    assert reply is not None and reply.text == "no thanks" and reply.notice
    assert prep.requests == []
    await gw.handle_inbound(message("after"))
    assert [m.content for m in prep.requests[-1].messages] == ["after"], "the refused message left no trace"
