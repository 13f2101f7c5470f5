"""A fake Slack for tests (placeholder docstring, written in full below)."""
from tests.fakes.slack.server import (DEFAULT_APP_TOKEN, DEFAULT_BOT_TOKEN, DEFAULT_IDENTITY, DEFAULT_LIMITS,
                                      FakeSlack)

__all__ = ["FakeSlack", "DEFAULT_APP_TOKEN", "DEFAULT_BOT_TOKEN", "DEFAULT_IDENTITY", "DEFAULT_LIMITS"]
