"""The caps every attachment is held to: the config's ``media`` section (docs/media.md#limits)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.config import MediaConfig as MediaLimits
from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.services import Services

__all__ = ["DEFAULT_LIMITS", "LIMITS", "MediaLimits", "media_limits"]

DEFAULT_LIMITS = MediaLimits()
LIMITS: StashKey[MediaLimits] = StashKey()


def media_limits(gateway: Services) -> MediaLimits:
    """The caps in force: ``media`` of the gateway's config, unless a test or an embedder put its own
    into ``gateway.stash[LIMITS]``."""
    return gateway.stash.get(LIMITS) or gateway.config.media
