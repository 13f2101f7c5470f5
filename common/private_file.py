"""A secret kept in a file of its own (the convention's shared secret, the database password): read whole, stripped,
and refused when other users may read it."""
from __future__ import annotations

import os
import stat


def read_private_file(file: str, where: str, refused: type[Exception]) -> str:
    """The stripped text of ``file``; ``refused(message)`` (``where`` names the setting) when it cannot be read or
    its mode lets group or others read it."""
    try:
        info = os.stat(file)
        with open(file, encoding="utf-8") as f:
            text = f.read().strip()
    except OSError as exc:
        raise refused(f"{where} {file}: {exc.strerror}") from None
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise refused(f"{where} {file} is readable by other users ({oct(stat.S_IMODE(info.st_mode))}): chmod 600 it")
    return text
