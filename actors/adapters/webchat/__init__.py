"""The embedded web chat: adapter.py (the actor), server.py (aiohttp), protocol.py (frames), static/ (the page)."""
