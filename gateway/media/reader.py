"""What runs inside the reader sandbox: one untrusted file, typed and read (image decoded and
downscaled, document to text). Every parser of attacker-controlled bytes is reached from here, and
only from a sandbox worker process (``gateway/media/sandbox.py``), never in the daemon itself.

The module itself is light: the daemon imports it to name ``read_file`` and to unpickle a ``Read``,
and must not load Pillow or pypdf for that (a third of a second of blocked event loop). The readers
are imported inside ``read_file``, in the worker, where the sandbox's fork server has preloaded
them (``sandbox.PRELOAD``).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.media.documents import Extracted
from gateway.media.limits import MediaLimits
from gateway.media.sniff import DOCUMENT_TYPES, IMAGE_TYPES, ZIP, office_type
from gateway.types import ImagePart


@dataclass(frozen=True, slots=True)
class Read:
    """A file read in the sandbox: its real type and what was read from it (neither, for a type
    kith does not read)."""

    mime_type: str
    image: ImagePart | None = None
    document: Extracted | None = None


def read_file(data: bytes, mime_type: str, name: str, limits: MediaLimits) -> Read:
    """``mime_type`` is ``sniff_magic``'s answer; a zip archive is opened here to see what it holds."""
    if mime_type == ZIP:
        mime_type = office_type(data)
    if mime_type in IMAGE_TYPES:
        from gateway.media.images import prepare_image

        return Read(mime_type, image=prepare_image(data, name=name, limits=limits))
    if mime_type in DOCUMENT_TYPES:
        from gateway.media.documents import extract_text

        return Read(mime_type, document=extract_text(data, mime_type, name=name, limits=limits))
    return Read(mime_type)
