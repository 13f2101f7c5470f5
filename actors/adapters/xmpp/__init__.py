"""XMPP: the platform folder (docs/adapters.md). Imports nothing: the registry reads platform.py."""
