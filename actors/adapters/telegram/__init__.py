"""The Telegram adapter (actors/adapters/telegram/README.md): ``adapter`` (the actor), ``api`` (the Bot API client: it only fetches),
``updates`` (Update -> MessageEvent), ``formatting`` (Markdown -> HTML / MarkdownV2), ``webhook`` (the push
endpoint)."""
