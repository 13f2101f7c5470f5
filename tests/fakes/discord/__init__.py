"""A fake Discord (placeholder docstring)."""
from tests.fakes.discord.server import DEFAULT_LIMITS, DEFAULT_TOKEN, FakeDiscord
from tests.fakes.discord.world import BOT_ID, DEFAULT_USER_ID, GENERAL_CHANNEL_ID, GUILD_ID

__all__ = ["FakeDiscord", "DEFAULT_TOKEN", "DEFAULT_LIMITS", "BOT_ID", "GUILD_ID", "GENERAL_CHANNEL_ID",
           "DEFAULT_USER_ID"]
