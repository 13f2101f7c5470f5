"""The HTTP adapter (type "http"): a signed generic webhook and an OpenAI-compatible API. See adapter.py."""
from actors.adapters.http.adapter import HttpApiAdapter

__all__ = ["HttpApiAdapter"]
