"""Images for the model: a real image (decoded by Pillow, never trusted from its name), no bomb, and
no larger than the model reads."""

from __future__ import annotations

import io
import warnings

from PIL import Image, ImageOps, UnidentifiedImageError

from gateway.config import PILLOW_MAX_PIXELS
from gateway.media.errors import TooLarge, Unsupported
from gateway.media.limits import MediaLimits
from gateway.types import ImagePart

# Pillow's own guard (a warning past this, an error past twice this) stays on as a second wall behind
# the explicit pixel check below (media.max_pixels, which the config keeps at or under it).
Image.MAX_IMAGE_PIXELS = PILLOW_MAX_PIXELS


def prepare_image(data: bytes, *, name: str, limits: MediaLimits) -> ImagePart:
    """Check and downscale ``data``; blocking (run it in a worker thread)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                # The header gives the size before a single pixel is decoded.
                width, height = img.size
                if width * height > limits.max_pixels:
                    raise TooLarge(f"{name}: the image is {width}x{height} pixels; the limit is "
                                   f"{limits.max_pixels:,} pixels")
                img.load()
                return _downscaled(img, name=name, limits=limits)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise TooLarge(f"{name}: the image decodes to too many pixels (a decompression bomb?)") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise Unsupported(f"{name}: the image could not be read ({type(exc).__name__})") from None


def _downscaled(img: Image.Image, *, name: str, limits: MediaLimits) -> ImagePart:
    if getattr(img, "is_animated", False):
        img.seek(0)  # the first frame: models take still images
    # Phone cameras store pixels sideways and an EXIF note to turn them; the model sees pixels only.
    upright = ImageOps.exif_transpose(img) or img
    frame = upright.convert("RGBA" if _has_alpha(upright) else "RGB")
    frame.thumbnail((limits.image_max_side, limits.image_max_side))
    out = io.BytesIO()
    if frame.mode == "RGBA":
        frame.save(out, format="PNG", optimize=True)
        mime = "image/png"
    else:
        frame.save(out, format="JPEG", quality=85)
        mime = "image/jpeg"
    return ImagePart(mime_type=mime, data=out.getvalue(), name=name)


def _has_alpha(img: Image.Image) -> bool:
    return img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info)
