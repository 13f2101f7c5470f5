"""A fake Mattermost server for tests: the REST API v4 and the WebSocket event stream, as Mattermost's public API
reference (api.mattermost.com) and its server's observable behaviour give them.

In process::

    with FakeMattermost() as mm:
        # base URL mm.base_url, token DEFAULT_TOKEN (a bot account's access token)
        dm = mm.direct_channel("alice")                  # the DM between the bot and alice
        mm.inject_post(dm, "alice", "hello")             # a posted event to the bot's connections
        mm.wait_for(lambda: mm.bot_posts(dm), timeout=5)

Standalone (outlives a killed gateway; users, channels and posts kept in the state file)::

    python -m tests.fakes.mattermost --port P --state FILE [--config '{"rate_per_s": 5}']

REST (``/api/v4``; ``Authorization: Bearer TOKEN`` (or ``Token TOKEN``) else 401
``api.context.session_expired.app_error``; errors are AppErrors ``{"id", "message", "detailed_error",
"request_id", "status_code"}``):
- ``GET /users/me``; ``GET /users/{me|id}/channels`` (every channel the bot is a member of, DMs included, each with
  ``type`` O/P/D/G and ``last_post_at``).
- ``GET /channels/{id}/posts?since=MS``: the posts created, edited or deleted after MS (``update_at``), at most
  ``posts_since_limit``, as a PostList ``{"order" (newest first), "posts", "next_post_id", "prev_post_id"}``.
  Not a member: 403.
- ``POST /posts`` {channel_id, message, root_id?, pending_post_id?, props?} -> 201 and the post; not a member 403;
  over ``max_post_size`` runes 400 ``model.post.is_valid.message_length.app_error``; a root_id that is not a root
  post of the channel 400 ``api.post.create_post.root_id.app_error``. A ``pending_post_id`` seen within
  ``pending_post_ttl`` (30 s, as the server's cache keeps it) answers the post the first create made, and makes
  none (``stats()["pending_deduplicated"]``); later, it is a new post. Read back, a post's ``pending_post_id`` is
  empty (the server does not store it); its ``props`` are kept.
- ``PUT /posts/{id}/patch`` {message?}: the bot's own post only (403), deleted or unknown 404
  ``app.post.get.app_error``; ``post_edited``. ``DELETE /posts/{id}``: the same rules; ``post_deleted``.
  ``GET /posts/{id}``. ``POST /users/{id}/typing`` {channel_id, parent_id}.
- ``POST /files`` (multipart: ``channel_id``, one ``files`` part) -> 201 ``{"file_infos": [FileInfo], "client_ids"}``;
  a create's ``file_ids`` must be files of its channel not yet on a post (else 400
  ``api.post.create_post.attach_files.error``), and the post gets ``metadata.files``. ``GET /files/{id}``: the
  bytes (a member of its channel only; unknown 404 ``app.file_info.get.app_error``).
- ``POST /reactions`` {user_id (the bot's own only), post_id, emoji_name}: any name matching Mattermost's rule
  (the fake keeps no emoji list), 201; ``GET /posts/{id}/reactions``; ``DELETE
  /users/{id}/posts/{post_id}/reactions/{emoji_name}``; ``reaction_added`` / ``reaction_removed``. In process,
  ``reaction_history(post_id, user_id)``: what the user's reactions on the post showed after each change.
- Rate limit (RateLimitSettings: ``rate_per_s`` 10, ``rate_burst`` 100, per user): over it, 429 with the text
  ``limit exceeded``, ``X-RateLimit-Limit``, ``X-RateLimit-Remaining: 0``, ``X-RateLimit-Reset`` and
  ``Retry-After`` in whole seconds. A request before that time is refused again and counted in
  ``stats()["retry_after_violations"]``.
- Faults (``set_faults``, FaultScript; methods create_post, patch_post, delete_post, typing): "flood" (a 429 that
  binds the channel for ``flood_retry_after`` rounded up to whole seconds), "error" (500), "drop" (closed before
  taking effect), "drop_after" (took effect, the answer lost).
- A held answer (``hold_next_answer("create_post", channel_id)``, tests/fakes/harness.py): the next post created in
  the channel is stored and announced, and its answer waits until ``release_held``.

WebSocket (``/api/v4/websocket``): see websocket.py (authentication challenge, hello, ``seq``, ``posted`` with the
post as a JSON string, ``user_typing``; faults: drop, skipped events, refused upgrades, a frozen connection).

Left out: teams' and channels' management, users other than by name, file thumbnails and previews, custom emoji and the system emoji list, emoji, search, threads'
follow state (CRT), webhooks and slash commands, preferences, ``/posts/{id}/thread``, pagination without ``since``,
multiple servers (cluster), WebSocket reconnection with ``connection_id``/``sequence_number`` replay.

Control API (JSON):

    POST /_control/inject            {"channel_id", "username", "message", "root_id"?, "props"?} -> the post
                                     (files are injected in process: ``inject_post(..., files=[(name, mime, bytes)])``)
    POST /_control/direct            {"username"} -> {"channel_id"}
    POST /_control/faults            FaultScript fields        POST /_control/config   DEFAULT_LIMITS keys
                                     (``ping_interval``: the server's WebSocket pings, seconds; 0 none)
    POST /_control/websocket/drop    POST /_control/websocket/skip {"count"}
    POST /_control/websocket/refuse {"refused"}               POST /_control/websocket/freeze {"frozen"}
    GET  /_control/channels/{id}  -> {"posts", "ops"}          GET  /_control/stats
"""
from tests.fakes.mattermost.server import DEFAULT_LIMITS, DEFAULT_TOKEN, FakeMattermost
from tests.fakes.mattermost.world import BOT_USERNAME

__all__ = ["FakeMattermost", "DEFAULT_TOKEN", "DEFAULT_LIMITS", "BOT_USERNAME"]
