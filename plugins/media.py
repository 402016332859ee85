"""Media in: a message's attachments become part of its turn (docs/media.md).

Images go to the model as image content, documents as text read from them (and into memory search
through the person's tree), voice notes as their transcript; refused files get one clear reply and
leave nothing stored. The work is in ``gateway/media``; this plugin only answers the hooks (and
stops the reader sandbox's worker processes with the daemon).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.hookspecs import hookimpl
from gateway.types import PreparedMessage, Reply, Turn

if TYPE_CHECKING:
    from gateway.services import Services


@hookimpl(trylast=True)
async def gateway_prepare_message(gateway: Services, turn: Turn) -> PreparedMessage | Reply | None:
    if not turn.message.attachments:
        return None  # most messages: the pipeline loads with the first attachment (Pillow, pypdf: in the readers only)
    from gateway.media.pipeline import take_in

    return await take_in(gateway, turn)


@hookimpl
async def gateway_shutdown(gateway: Services) -> None:
    from gateway.media.sandbox import close_sandbox  # light: the readers load in the workers only

    await close_sandbox(gateway)
