"""IRC (RFC 1459 / RFC 2812) over asyncio streams: actors/adapters/irc/README.md."""
