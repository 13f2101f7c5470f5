"""The gateway's version: the one place it is written (setup.cfg reads it from here; ``--version`` prints it)."""
VERSION = "0.1.0"
