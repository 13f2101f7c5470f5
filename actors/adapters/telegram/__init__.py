"""The Telegram adapter (docs/telegram.md): ``adapter`` (the actor), ``updates`` (Update -> MessageEvent),
``formatting`` (Markdown -> HTML / MarkdownV2), ``webhook`` (the push endpoint). The Bot API client is
actors/adapters/telegram_api.py."""
from actors.adapters.telegram.adapter import TelegramAdapter

__all__ = ["TelegramAdapter"]
