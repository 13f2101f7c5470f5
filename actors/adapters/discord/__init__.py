"""The Discord adapter: gateway WebSocket intake, REST replies (docs/discord.md)."""
