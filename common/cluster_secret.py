"""The secret every host of a convention shares: every actor frame between the hosts is signed with a key derived
from it (daemon/transport_key.py; the signing is runtime/frame_mac.py). Apart from common/cluster.py because it reads
the configuration, which reads that."""
from __future__ import annotations

import os

from common.config import setting
from common.private_file import read_private_file

MIN_SECRET_CHARS = 16


class NoClusterSecret(ValueError):
    """The convention's shared secret is missing, too short or readable by others."""


def cluster_secret(config: dict) -> str:
    """The secret every host of the convention shares ([cluster] secret_file, else the variable named by [cluster]
    secret_env): every actor frame between the hosts is signed with a key derived from it."""
    file = setting(config, "cluster", "secret_file")
    if file:
        secret = read_private_file(file, "[cluster] secret_file", NoClusterSecret)
        where = f"[cluster] secret_file {file}"
    else:
        name = setting(config, "cluster", "secret_env")
        secret, where = os.environ.get(name, "").strip(), f"the environment variable {name} ([cluster] secret_env)"
    if len(secret) < MIN_SECRET_CHARS:
        raise NoClusterSecret(f"a convention needs a shared secret of at least {MIN_SECRET_CHARS} characters, the "
                              f"same on every host, in {where}: every actor frame between the hosts is signed with "
                              "it (e.g. `openssl rand -hex 32`)")
    return secret
