"""The caps every attachment is held to (docs/media.md#limits)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gateway.types import StashKey

if TYPE_CHECKING:
    from gateway.app import Gateway


@dataclass(frozen=True, slots=True, kw_only=True)
class MediaLimits:
    max_bytes: int = 20 * 1024 * 1024  # per file, as fetched from the channel or uploaded
    max_files: int = 8  # per message
    max_pixels: int = 40_000_000  # decoded size of an image (a bomb is refused from its header)
    image_max_side: int = 1568  # longest side sent to the model (what vision models read at full detail)
    max_pages: int = 200  # a longer PDF is refused, not read in part
    max_chars: int = 60_000  # text kept from one document (the rest is cut, and the cut is said)
    extract_timeout_s: float = 30.0  # reading one document or image, in a worker thread
    transcribe_timeout_s: float = 120.0
    fetch_timeout_s: float = 60.0  # downloading one file from its channel
    upload_ttl_s: float = 3600.0  # an upload not used by a message within this is dropped
    upload_total_bytes: int = 200 * 1024 * 1024  # pending uploads held at once, for everyone


DEFAULT_LIMITS = MediaLimits()
LIMITS: StashKey[MediaLimits] = StashKey()


def media_limits(gateway: Gateway) -> MediaLimits:
    """The caps in force (tests and embedders may put their own into ``gateway.stash[LIMITS]``)."""
    return gateway.stash.get(LIMITS) or DEFAULT_LIMITS
