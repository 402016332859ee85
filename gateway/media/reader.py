"""What runs inside the reader sandbox: one untrusted file, typed and read (image decoded and
downscaled, document to text). Every parser of attacker-controlled bytes is reached from here, and
only from a sandbox worker process (``gateway/media/sandbox.py``), never in the daemon itself.

Importing this module loads Pillow and pypdf: the sandbox's fork server preloads it once, so each
worker it forks starts with them in memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import pypdf  # noqa: F401  (preloaded into the fork server; the PDF reader imports it lazily)

from gateway.media.documents import Extracted, extract_text
from gateway.media.images import prepare_image
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
        return Read(mime_type, image=prepare_image(data, name=name, limits=limits))
    if mime_type in DOCUMENT_TYPES:
        return Read(mime_type, document=extract_text(data, mime_type, name=name, limits=limits))
    return Read(mime_type)
