"""A fake Slack for tests: the Web API, Socket Mode and the Events API over HTTP, in Slack's wire format.

In process::

    with FakeSlack(time_scale=0.1) as slack:
        web = AsyncWebClient(token=DEFAULT_BOT_TOKEN, base_url=slack.api_url)      # slack-sdk, or any client
        sock = SocketModeClient(app_token=DEFAULT_APP_TOKEN, web_client=web)       # apps.connections.open → ws
        slack.inject_message("hello <@U0FAKEBOT1>", "C0GENERAL1")                  # message + app_mention events
        ... the bot answers ...
        slack.wait_for(lambda: slack.final_texts("C0GENERAL1") == ["hi"], timeout=5)

Standalone (outlives a killed gateway; messages and undelivered events kept in the state file)::

    python -m tests.fakes.slack --port P --state FILE [--config '{"time_scale": 0.1}']

Modules: ``server`` (FakeSlack, dispatch, control API), ``webapi`` (chat methods), ``channels`` (conversations,
users, ts), ``formatting`` (mrkdwn escaping, block limits), ``ratelimits`` (tiers), ``events`` (what becomes an
event), ``delivery`` (acknowledgement deadlines and retries), ``socketmode``, ``httpevents``.

Wire format implemented (from docs.slack.dev; shapes checked against slack-sdk's clients):

* Web API at ``/api/<method>``, GET or POST, parameters as query, form or JSON body; the token as ``Authorization:
  Bearer`` or a ``token`` parameter (``not_authed``, ``invalid_auth``; an ``xapp-`` token on a bot method or the
  reverse: ``not_allowed_token_type``). Refusals are HTTP 200 ``{"ok": false, "error": code}``; rate limits are
  429 ``ratelimited`` with ``Retry-After``; an unknown method is ``unknown_method``.

  - ``auth.test`` → url, team, user, team_id, user_id, bot_id.
  - ``chat.postMessage`` (channel: an id, a name or a user id meaning the bot's DM; text; blocks; thread_ts;
    mrkdwn) → ``{"channel", "ts", "message"}``, the message with ``bot_id``, ``app_id``, ``bot_profile``;
    ``channel_not_found``, ``not_in_channel``, ``is_archived``, ``no_text``, ``msg_too_long`` (over 40,000
    characters; ``over_limit: "truncate"`` cuts instead, as the docs say Slack does), ``invalid_blocks`` (over 50
    blocks, a section's text over 3,000, a header's over 150, a markdown block's over 12,000),
    ``invalid_blocks_format``. A thread_ts naming a reply is taken as its parent's thread; one naming no message
    is kept (both counted in stats).
  - ``chat.update`` (channel, ts, text, blocks) → ``{"channel", "ts", "text", "message"}`` with ``edited``;
    ``message_not_found`` (unknown or deleted), ``cant_update_message`` (not the bot's), ``msg_too_long`` over
    ``update_text_limit`` (40,000 by default; chat.update's reference words msg_too_long as "cannot exceed
    4,000 characters": set 4000 to test against that reading). The same text again is accepted (counted as
    ``updates_unchanged``).
  - ``chat.delete`` (channel, ts) → ``{"channel", "ts"}``; ``message_not_found``, ``cant_delete_message``.
  - ``conversations.info`` (channel) → the conversation object; ``users.info`` (user) → the user object;
    ``channel_not_found``, ``user_not_found``.
  - ``apps.connections.open`` (app-level token, POST only: ``insecure_request``) → ``{"url": "ws://…"}``.
  - Rate limits per method (ratelimits.py): chat.postMessage about 1 per second per channel (burst 3), Tier 3
    (50/min, burst 10) for chat.update, chat.delete, conversations.info and apps.connections.open, Tier 4 for
    users.info, auth.test unlimited. A call before Retry-After has passed is refused and counted
    (``retry_after_violations``).
* Conversations: ``D…`` DMs (``channel_type: "im"``), ``C…`` public channels, ``G…`` private ones; ``ts`` strings
  "1700000000.000100", unique and increasing per conversation; threads by ``thread_ts`` (replies carry
  ``parent_user_id``; a parent carries ``reply_count`` and its own ts as ``thread_ts``).
* Events (events.py): ``message`` (and ``app_mention`` for a channel message mentioning ``<@BOT_USER_ID>``),
  ``message_changed``, ``message_deleted``, the bot's own messages included with ``bot_id``; in the
  ``event_callback`` wrapper (event_id, event_time, team_id, api_app_id, authorizations); only those the app is
  subscribed to (``subscriptions``).
* Socket Mode (socketmode.py): hello, ``events_api`` envelopes, acks by ``envelope_id``, redelivery after 3 s
  with ``retry_attempt`` + 1 and ``retry_reason: "timeout"`` up to 3 times (delivery.py), ``disconnect`` with
  ``warning`` / ``refresh_requested`` / ``link_disabled`` / ``too_many_websockets``, pings both ways.
* Events API over HTTP (httpevents.py): url_verification, ``X-Slack-Signature`` / ``X-Slack-Request-Timestamp``,
  retries with ``X-Slack-Retry-Num`` / ``X-Slack-Retry-Reason``, ``X-Slack-No-Retry``.
* Text (formatting.py): stored as sent, with ``displayed`` (what a person sees: control sequences rendered,
  ``&amp;`` ``&lt;`` ``&gt;`` decoded) and ``markup_problems`` (an unescaped ``&``, ``<`` or ``>``, or an invalid
  ``<…>`` sequence).

Buttons (interactive.py): ``actions`` blocks of buttons checked, ``press_button`` queues a ``block_actions``
payload delivered in a Socket Mode envelope of ``type: "interactive"`` (acknowledged and redelivered as events
are), ``chat.postEphemeral`` kept per user (``ephemeral()``).

Left out: every other method (conversations.history and .replies, reactions, files, views, scheduled messages,
``markdown_text``), interactive payloads other than button presses, the Interactivity Request URL over HTTP,
``response_url``, and slash commands over Socket Mode, response payloads
in acks (accepted, ignored), message attachments, ``reply_broadcast``, ``as_user``/``username``/icons, rich_text
``blocks`` on user messages, mpim conversations, channel membership events, the workspace-wide posting limit
(off unless ``post_workspace_per_minute`` is set), ticket expiry and Slack closing sockets on its own schedule
(only when told to), disabling an app's event subscriptions after repeated failures, the ``bot_message`` subtype
(the bot's messages are told apart by ``bot_id``, as an adapter should tell them), display names in
``displayed`` (mentions show the user id), and Slack's exact counting of characters (the fake counts code points).

Control API (JSON; ``tests.fakes.harness.ControlClient`` speaks it):

    POST /_control/inject        one {"text", "channel"?, "user"?, "thread_ts"?, "name"?, "user_name"?}, a list,
                                 or {"messages": [...]}        -> {"ok", "messages": [{"channel", "ts", "message",
                                                                   "event_ids"}]}
    POST /_control/inject_edit   {"channel", "ts", "text"}     POST /_control/inject_delete {"channel", "ts"}
    POST /_control/channels      {"channel", "name"?, "member"?, "user"?, "archived"?}
    GET  /_control/channels      GET /_control/channels/{id} -> {"channel", "member", "messages", "ops"}
    GET  /_control/stats         GET /_control/events        GET /_control/envelopes   GET /_control/connections
    POST /_control/disconnect    {"reason", "connection"?, "close_after"?}   -> {"ok", "connections": [ids]}
    POST /_control/drop          {"connection"?}  (TCP cut, no close frame)   POST /_control/silence (half-open)
    POST /_control/request_url   {"url": str|null}   -> {"ok", "verified", "status", "answer"}
    POST /_control/faults        FaultScript fields (kinds flood, error (500), internal_error (200), drop,
                                 drop_after); methods are Web API names (default the three chat methods)
    POST /_control/config        DEFAULT_LIMITS keys: text_limit, update_text_limit, over_limit, time_scale,
                                 tier{1..4}_per_minute, post_interval, post_burst, post_workspace_per_minute,
                                 ack_timeout, retry_delays, offline_delivery (queue | spend), subscriptions,
                                 echo_bot_events, max_connections, ping_interval
    POST /_control/reset

Configuration and faults are not persisted: pass them again (``--config JSON``) on restart.
"""
from tests.fakes.slack.server import (DEFAULT_APP_TOKEN, DEFAULT_BOT_TOKEN, DEFAULT_IDENTITY, DEFAULT_LIMITS,
                                      FakeSlack)

__all__ = ["FakeSlack", "DEFAULT_APP_TOKEN", "DEFAULT_BOT_TOKEN", "DEFAULT_IDENTITY", "DEFAULT_LIMITS"]
