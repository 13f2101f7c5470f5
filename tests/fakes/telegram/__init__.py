"""A fake Telegram Bot API server for tests.

In process::

    with FakeTelegram(time_scale=0.05) as tg:
        api = TelegramAPI(tg.token, base_url=tg.base_url)
        update = tg.inject_message("hello", chat_id=42)            # a private chat with user 42
        ... the bot answers ...
        tg.wait_for(lambda: tg.final_texts(42) == ["hi"], timeout=5)

Standalone (outlives a killed gateway; history kept in the state file)::

    python -m tests.fakes.telegram --port P --state FILE [--config '{"time_scale": 0.05}']

Modules: ``server`` (FakeTelegram, dispatch, control API), ``botapi`` (chat methods, flood control),
``updates`` (injection, getUpdates, webhooks), ``formatting`` (MarkdownV2 and HTML parsers).

Control API (JSON; ``tests.fakes.fakeplatform.ControlClient`` speaks it):

    POST /_control/inject       one {"text", "chat_id"?, "chat_type"?: private|group|supergroup, "user_id"?,
                                "username"?, "first_name"?, "title"?, "is_forum"?, "thread_id"?}, a list, or
                                {"updates": [...]}                                -> {"ok", "updates": [Update]}
    POST /_control/inject_edit  {"chat_id", "message_id", "text"}                 -> Update (edited_message)
    POST /_control/press        {"chat_id", "message_id", "data", "user_id"?, "query_id"?} -> Update (callback_query);
                                the answer: FakeTelegram.callback_answer(query_id)
    GET  /_control/chats        GET /_control/chats/{chat_id} -> {"chat", "messages", "ops", "topics", "blocked"}
    GET  /_control/stats        (poll_conflicts: getUpdates cut by a newer one with 409; max_polls_pending)
    GET  /_control/updates      -> {"pending", "webhook_log", "confirmed_offset"}
    GET  /_control/polls        -> {"polls": [every getUpdates: id, peer, at, offset, timeout, ended_at, status,
                                updates, ended_by], "pending": getUpdates being served now}
    POST /_control/faults       FaultScript fields; methods are Bot API names (default the four write methods)
    POST /_control/config       limits: text_limit, per_chat_interval, per_chat_burst, group_per_minute,
                                global_per_second, time_scale, webhook_retry_delay
    POST /_control/block        {"chat_id", "blocked"?}     POST /_control/topics {"chat_id", "thread_id"}
    POST /_control/reset
"""
from tests.fakes.telegram.formatting import EntityParseError, parse_html, parse_markdown_v2, utf16_len
from tests.fakes.telegram.server import DEFAULT_LIMITS, DEFAULT_TOKEN, FakeTelegram

__all__ = ["FakeTelegram", "DEFAULT_TOKEN", "DEFAULT_LIMITS", "EntityParseError", "parse_html",
           "parse_markdown_v2", "utf16_len"]
