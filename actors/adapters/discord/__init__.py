"""The Discord adapter: gateway WebSocket intake, REST replies (actors/adapters/discord/README.md)."""
