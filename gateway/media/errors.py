"""Why an attachment could not be taken in; each carries a reply the person can act on.

Adapters raise these from ``Adapter.fetch_attachment``; the media pipeline raises them while
checking and extracting. ``str(error)`` is the clear reply shown to the person.
"""

from __future__ import annotations


class MediaError(Exception):
    """An attachment was refused; the message is safe to show to the person who sent it."""


class TooLarge(MediaError):
    """The file is over a size, page or pixel cap."""


class Unsupported(MediaError):
    """The file's real type (sniffed from its bytes) is not one kith reads, or it cannot be read
    (corrupt, encrypted)."""


class AttachmentUnavailable(MediaError):
    """The channel could not hand over the file (expired link, unknown upload, no download API)."""
