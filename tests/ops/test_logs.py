"""JSON log lines: every line of a turn carries its turn id; secrets never reach a line, tracebacks
included."""

from __future__ import annotations

import io
import json
import logging

from gateway.hookspecs import hookimpl
from gateway.logs import make_handler
from gateway.testing import GatewayFactory, message
from gateway.types import Turn

SECRET = "sk-test-secret-0123456789"
log = logging.getLogger("kith.test.ops")


class Chatty:
    """A plugin that logs inside a turn, a secret and a traceback included."""

    @hookimpl
    def gateway_context_sections(self, turn: Turn) -> None:
        log.warning("building context for %s with key %s", turn.message.account_id, SECRET)
        try:
            raise RuntimeError(f"upstream said no to {SECRET}")
        except RuntimeError:
            log.exception("a plugin's failure")


async def test_json_lines_carry_the_turn_id_and_no_secret(make_gateway: GatewayFactory) -> None:
    gw = await make_gateway(plugins=(Chatty(),), llm={"provider": "echo", "api_key": SECRET},
                            logging={"format": "json"})
    stream = io.StringIO()
    handler = make_handler(gw.config)
    handler.setStream(stream)  # type: ignore[attr-defined]
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        log.warning("outside any turn")
        reply = await gw.handle_inbound(message("hello", account="json-logs"))
        second = await gw.handle_inbound(message("again", account="json-logs"))
    finally:
        root.removeHandler(handler)
    assert reply is not None and second is not None and reply.turn_id != second.turn_id
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    ours = [rec for rec in lines if rec["logger"] == "kith.test.ops"]
    assert [rec.get("turn") for rec in ours] == [None, reply.turn_id, reply.turn_id, second.turn_id,
                                                 second.turn_id]
    assert {"ts", "level", "logger", "msg"} <= set(ours[1])
    assert "RuntimeError" in ours[2]["exc"]
    assert SECRET not in stream.getvalue() and "***" in ours[1]["msg"] and "***" in ours[2]["exc"]


def test_text_format_is_unchanged(kith_config: object) -> None:
    cfg = kith_config()  # type: ignore[operator]
    handler = make_handler(cfg)
    record = logging.LogRecord("kith.x", logging.INFO, __file__, 1, "plain %s", ("line",), None)
    handler.filter(record)
    assert handler.format(record).endswith("INFO    kith.x: plain line")
