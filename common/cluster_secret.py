"""The secret every host of a convention shares: every actor frame between the hosts is signed with a key derived
from it (daemon/transport_key.py; the signing is runtime/frame_mac.py). Apart from common/cluster.py because it reads
the configuration, which reads that."""
from __future__ import annotations

import os
import stat

from common.config import setting

MIN_SECRET_CHARS = 16


class NoClusterSecret(ValueError):
    """The convention's shared secret is missing, too short or readable by others."""


def cluster_secret(config: dict) -> str:
    """The secret every host of the convention shares ([cluster] secret_file, else the variable named by [cluster]
    secret_env): every actor frame between the hosts is signed with a key derived from it."""
    file = setting(config, "cluster", "secret_file")
    if file:
        try:
            info = os.stat(file)
            with open(file, encoding="utf-8") as f:
                secret = f.read().strip()
        except OSError as exc:
            raise NoClusterSecret(f"[cluster] secret_file {file}: {exc.strerror}") from None
        if stat.S_IMODE(info.st_mode) & 0o077:
            raise NoClusterSecret(f"[cluster] secret_file {file} is readable by other users "
                                  f"({oct(stat.S_IMODE(info.st_mode))}): chmod 600 it")
        where = f"[cluster] secret_file {file}"
    else:
        name = setting(config, "cluster", "secret_env")
        secret, where = os.environ.get(name, "").strip(), f"the environment variable {name} ([cluster] secret_env)"
    if len(secret) < MIN_SECRET_CHARS:
        raise NoClusterSecret(f"a convention needs a shared secret of at least {MIN_SECRET_CHARS} characters, the "
                              f"same on every host, in {where}: every actor frame between the hosts is signed with "
                              "it (e.g. `openssl rand -hex 32`)")
    return secret
