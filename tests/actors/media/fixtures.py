"""Files for the media tests, made on the spot: real images (Pillow), and the hostile ones of docs/media.md."""
from __future__ import annotations

import io
import struct
import zlib

from PIL import Image


def png(width: int = 64, height: int = 48, colour=(200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), colour).save(out, "PNG")
    return out.getvalue()


def jpeg(width: int = 64, height: int = 48) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 120, 200)).save(out, "JPEG")
    return out.getvalue()


def polyglot() -> bytes:
    """A valid PNG whose tail is an HTML page with a script: a browser sniffing it could run it."""
    return png() + b"<html><body><script>alert('owned')</script></body></html>"


def pixel_bomb(width: int = 100_000, height: int = 100_000) -> bytes:
    """A tiny PNG whose header claims width x height pixels (40 GB decoded): the decompression bomb."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    rows = zlib.compress(b"\x00" * 1024)   # far too little data: it never gets that far
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")


def zip_bomb() -> bytes:
    """A zip of one highly compressible member (what a file named bomb.png may really be)."""
    import zipfile
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        # A fixed date: the same bytes in every process (test ids are made of them, and pytest-xdist's workers
        # must collect the same ids).
        archive.writestr(zipfile.ZipInfo("zeros.bin", date_time=(2026, 1, 1, 0, 0, 0)), b"\x00" * 5_000_000,
                         compress_type=zipfile.ZIP_DEFLATED)
    return out.getvalue()


OGG_VOICE = b"OggS\x00\x02" + b"\x00" * 20 + b"OpusHead" + bytes(range(200))
