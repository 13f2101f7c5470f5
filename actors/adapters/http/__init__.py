"""The HTTP adapter (type "http"): a signed generic webhook and an OpenAI-compatible API. See adapter.py."""
