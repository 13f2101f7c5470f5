"""FakeTeams: the Bot Connector a Teams bot calls (conversations' activities: send, reply, update, delete; typing),
the Microsoft identity platform's token endpoint (client credentials), the Connector's OpenID metadata and signing
keys, the activities the Connector POSTs to the bot's messaging endpoint (signed with the fake's own key, delivered
through the WhatsApp fake's delivery loop: one POST, sent again while unanswered as the Connector does), a control
API and in-process inspection helpers."""
from __future__ import annotations

import base64
import hashlib
import json
import secrets
import time
from typing import Optional
from urllib.parse import unquote

from aiohttp import web

from tests.fakes.harness import FakeServer, FaultScript, FloodGate, control_route, drop_connection
from tests.fakes.teams.files import FILE_CARDS, FileMethods, card_problem
from tests.fakes.teams.keys import CHANNEL_ISSUER, ROTATED_KID, SIGNING_KID, activity_token, jwk
from tests.fakes.whatsapp.webhooks import WebhookMethods

DEFAULT_APP_ID = "8f0c7f4e-3b1a-4c55-9d1e-2a6b9c0d1e2f"
DEFAULT_PASSWORD = "fake~client~secret~0123456789"
CONNECTOR_SCOPE = "https://api.botframework.com/.default"
DEFAULT_LIMITS = {"text_limit": 20000, "token_lifetime": 3600, "keys_max_age": 3600, "answer_timeout": 15.0,
                  "retries": 0, "retry_delays": [1.0],
                  # Teams' per bot per conversation limits: (seconds, operations) windows.
                  "thread_windows": [[1.0, 7], [2.0, 8], [30.0, 60], [3600.0, 1800]]}
WRITE_METHODS = ("send", "reply", "update", "delete", "typing")
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
CARD_TYPE = "application/vnd.microsoft.card.adaptive"
IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif")
MESSAGE_BYTES = 28 * 1024    # Teams refuses a message (its JSON, inline images included) past about 28 KB


def image_bytes(attachment: dict) -> Optional[bytes]:
    """An inline image attachment's bytes (its contentUrl a base64 data URI of its contentType), else None."""
    url, prefix = attachment.get("contentUrl"), f"data:{attachment.get('contentType')};base64,"
    if not isinstance(url, str) or not url.startswith(prefix):
        return None
    try:
        return base64.b64decode(url[len(prefix):], validate=True)
    except ValueError:
        return None


def card_actions(activity: dict) -> dict:
    """The Action.Submit buttons of an activity's Adaptive Cards, title -> data."""
    return {action["title"]: action.get("data") for card in activity.get("attachments") or []
            if card.get("contentType") == CARD_TYPE
            for action in card["content"].get("actions", []) if action.get("type") == "Action.Submit"}


def error(status: int, code: str, message: str, headers: Optional[dict] = None) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status, headers=headers)


class FakeTeams(FileMethods, WebhookMethods, FakeServer):
    """``limits`` (DEFAULT_LIMITS keys) as keyword arguments; faults through ``set_faults`` (kinds flood: 429 with
    Retry-After, error: 500, drop, drop_after) for the write methods."""

    def __init__(self, *, port: int = 0, state_file: Optional[str] = None, app_id: str = DEFAULT_APP_ID,
                 app_password: str = DEFAULT_PASSWORD, webhook_url: Optional[str] = None, **limits):
        self.app_id, self.app_password = app_id, app_password
        super().__init__(port=port, state_file=state_file)
        self.limits = dict(DEFAULT_LIMITS)
        self.configure(**limits)
        self.webhook_url = webhook_url
        self.faults = FaultScript(WRITE_METHODS)
        self.gates = FloodGate()
        self.signing_kid = SIGNING_KID
        self.published_kids = [SIGNING_KID]
        self._http = None
        self._tasks: set = set()

    def initial_state(self) -> dict:
        stats = dict.fromkeys(("sends", "replies", "updates", "deletes", "typings", "auth_failures",
                               "tokens_granted", "tokens_refused", "keys_served", "metadata_served",
                               "retry_after_violations", "pace_violations", "flood_served", "webhook_attempts",
                               "webhook_retries", "token_leaks"), 0)
        return {"conversations": {}, "activities": {}, "tokens": {}, "ops": [], "files": {}, "writes": {},
                "deliveries": [], "next_activity": 1, "next_delivery": 1, "stats": stats, "uploads": {},
                "shared": {}}

    def configure(self, **limits) -> None:
        unknown = set(limits) - set(DEFAULT_LIMITS)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}")
        with self._lock:
            self.limits.update(limits)

    def set_faults(self, **settings) -> None:
        with self._lock:
            self.faults.configure(**settings)

    def rotate_keys(self) -> None:
        """Sign with a new key from now on and publish only it (Microsoft rolls its keys over)."""
        self.signing_kid, self.published_kids = ROTATED_KID, [ROTATED_KID]

    async def on_stopping(self) -> None:
        await self.close_webhooks()

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/botframework.com/oauth2/v2.0/token"

    @property
    def metadata_url(self) -> str:
        return f"{self.base_url}/v1/.well-known/openidconfiguration"

    @property
    def service_url(self) -> str:
        return f"{self.base_url}/"

    # -- conversations and injected activities
    @staticmethod
    def user(name: str) -> str:
        return "29:1" + hashlib.md5(name.encode()).hexdigest()

    def personal(self, name: str) -> str:
        """The personal chat of the user ``name`` with the bot (made on first use, as installing the app does)."""
        return self._conversation("a:1" + hashlib.md5(("dm-" + name).encode()).hexdigest(), "personal")

    def group_chat(self, name: str) -> str:
        return self._conversation("19:" + hashlib.md5(("gc-" + name).encode()).hexdigest() + "@thread.v2",
                                  "groupChat")

    def channel(self, name: str) -> str:
        """A team's channel, the bot installed in the team; a post in it is a conversation of its own
        (``channel_post``)."""
        return self._conversation("19:" + hashlib.md5(("ch-" + name).encode()).hexdigest() + "@thread.tacv2",
                                  "channel")

    def _conversation(self, cid: str, kind: str) -> str:
        with self.mutate() as state:
            state["conversations"].setdefault(cid, {"conversationType": kind})
        return cid

    def new_activity_id(self) -> str:
        with self.mutate() as state:
            number = state["next_activity"]
            state["next_activity"] += 1
        return str(1_700_000_000_000 + number)

    def message_activity(self, conversation: str, text: str, user: str = "alice", mention: bool = True,
                         thread: Optional[str] = None) -> dict:
        """A user's message as the Connector posts it. In a channel it is a new post (or a reply in ``thread``,
        the id of a post), the conversation id naming the thread; in a channel and a group chat ``mention`` puts
        the bot's @-mention first, as Teams writes it."""
        kind = self.read(lambda s: s["conversations"].get(conversation.split(";")[0], {}).get("conversationType"))
        activity_id = self.new_activity_id()
        conversation_json = {"conversationType": kind, "tenantId": TENANT, "id": conversation}
        channel_data = {"tenant": {"id": TENANT}}
        if kind == "channel":
            conversation_json["id"] = f"{conversation};messageid={thread or activity_id}"
            conversation_json["isGroup"] = True
            channel_data.update(teamsChannelId=conversation, team={"id": "19:team" + conversation[3:11]},
                                channel={"id": conversation})
        elif kind == "groupChat":
            conversation_json["isGroup"] = True
        bot = {"id": "28:" + self.app_id, "name": "Gateway"}
        entities = [{"type": "clientInfo", "locale": "en-US", "country": "US", "platform": "Web"}]
        if mention and kind != "personal":
            text = "<at>Gateway</at> " + text
            entities.append({"type": "mention", "mentioned": bot, "text": "<at>Gateway</at>"})
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1e6):06d}0Z"
        activity = {"type": "message", "id": activity_id, "timestamp": stamp, "localTimestamp": stamp,
                    "serviceUrl": self.service_url, "channelId": "msteams",
                    "from": {"id": self.user(user), "name": user.title(), "aadObjectId": hashlib.md5(
                        user.encode()).hexdigest()}, "conversation": conversation_json, "recipient": bot,
                    "textFormat": "plain", "text": text, "entities": entities, "channelData": channel_data,
                    "locale": "en-US"}
        if kind == "channel" and thread:
            activity["replyToId"] = thread
        return activity

    def deliver_activity(self, activity: dict, token: Optional[str] = None, headers: Optional[dict] = None) -> str:
        """POST ``activity`` to the bot's endpoint under a fresh token (or ``token``, or exactly ``headers``)."""
        if headers is None:
            token = token or activity_token(self.app_id, str(activity.get("serviceUrl")), kid=self.signing_kid)
            headers = {"Authorization": f"Bearer {token}",
                       "User-Agent": "Microsoft-SkypeBotApi (Microsoft-BotFramework/3.0)"}
        conversation = activity.get("conversation") if isinstance(activity.get("conversation"), dict) else {}
        return self.deliver(activity.get("type", ""), activity, activity.get("id"), str(conversation.get("id", "")),
                            headers)

    def inject_text(self, conversation: str, text: str, user: str = "alice", **kwargs) -> str:
        return self.deliver_activity(self.message_activity(conversation, text, user, **kwargs))

    def inject_file(self, conversation: str, data: bytes, caption: str = "", user: str = "alice",
                    content_type: str = "image/png") -> str:
        """A user pastes an image into a message: the activity carries an attachment of its type whose
        ``contentUrl`` is ``<serviceUrl>v3/attachments/<id>/views/original`` (served to a bearer of a live bot
        token), beside the ``text/html`` copy of the message Teams adds."""
        with self.mutate() as state:
            attachment_id = f"0-eus-d1-{secrets.token_hex(16)}"
            state["files"][attachment_id] = {"type": content_type, "data": base64.b64encode(data).decode()}
        activity = self.message_activity(conversation, caption, user)
        url = f"{self.service_url}v3/attachments/{attachment_id}/views/original"
        activity["attachments"] = [{"contentType": content_type, "contentUrl": url},
                                   {"contentType": "text/html", "content": f"<p>{caption}</p>"}]
        return self.deliver_activity(activity)

    def press_button(self, conversation: str, activity_id: str, title: str, user: str = "alice") -> str:
        """``user`` presses the Action.Submit titled ``title`` on the bot's activity ``activity_id``: the
        Connector posts a message activity with no text, ``value`` the action's data and ``replyToId`` the card's
        activity (signed like any other). ValueError if the activity shows no such button."""
        [shown] = [a for a in self.activities(conversation) if a["id"] == activity_id] or [None]
        actions = card_actions(shown) if shown is not None and not shown["deleted"] else {}
        if title not in actions:
            raise ValueError(f"no button {title!r} on activity {activity_id}: {sorted(actions)}")
        activity = self.message_activity(conversation, "", user, mention=False, thread=shown["thread"])
        activity.pop("text")
        activity.update(value=dict(actions[title]), replyToId=activity_id)
        return self.deliver_activity(activity)

    def activity_of(self, delivery_id: str) -> dict:
        return json.loads(self.delivery(delivery_id)["body"])

    # -- inspection
    def activities(self, conversation: str) -> list[dict]:
        """The bot's message activities in the conversation (a channel's: in every thread), in order: {"id",
        "text", "reply_to", "thread", "deleted", "edits"}."""
        return self.read(lambda s: [a for cid, shown in s["activities"].items()
                                    if cid.split(";")[0] == conversation.split(";")[0] for a in shown])

    def ops(self, conversation: str, method: str) -> list[dict]:
        return self.read(lambda s: [o for o in s["ops"] if o["conversation"].split(";")[0] == conversation.split(
            ";")[0] and o["method"] == method])

    def stats(self) -> dict:
        return self.read(lambda s: s["stats"])

    # -- routes
    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/v1/.well-known/openidconfiguration", self.openid_metadata)
        app.router.add_get("/v1/.well-known/keys", self.keys)
        app.router.add_post("/{tenant}/oauth2/v2.0/token", self.token)
        app.router.add_get("/v3/attachments/{attachment}/views/{view}", self.attachment)
        self.add_file_routes(app)
        base = "/v3/conversations/{conversation}/activities"
        app.router.add_post(base, self.writer("send"))
        app.router.add_post(base + "/{activity}", self.writer("reply"))
        app.router.add_put(base + "/{activity}", self.writer("update"))
        app.router.add_delete(base + "/{activity}", self.writer("delete"))
        control_route(app, "GET", "/_control/stats", lambda body: self.stats())
        control_route(app, "POST", "/_control/inject", lambda body: {"delivery": self.inject_text(
            self.personal(str(body["user"])), str(body["text"]), str(body["user"]))})
        control_route(app, "POST", "/_control/webhook_url", lambda body: setattr(self, "webhook_url",
                                                                              body.get("url")))

    async def openid_metadata(self, request: web.Request) -> web.Response:
        with self.mutate() as state:
            state["stats"]["metadata_served"] += 1
        return web.json_response({"issuer": CHANNEL_ISSUER,
                                  "authorization_endpoint": "https://invalid.botframework.com",
                                  "jwks_uri": f"{self.base_url}/v1/.well-known/keys",
                                  "id_token_signing_alg_values_supported": ["RS256"],
                                  "token_endpoint_auth_methods_supported": ["private_key_jwt"]})

    async def keys(self, request: web.Request) -> web.Response:
        with self.mutate() as state:
            state["stats"]["keys_served"] += 1
        return web.json_response({"keys": [jwk(kid) for kid in self.published_kids]},
                                 headers={"Cache-Control": f"public, max-age={self.limits['keys_max_age']}"})

    async def token(self, request: web.Request) -> web.Response:
        """The client-credentials grant of the bot's app id and secret, for the Connector's scope."""
        form = await request.post()
        problem = None
        if form.get("grant_type") != "client_credentials":
            problem = (400, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported grant type")
        elif form.get("client_id") != self.app_id:
            problem = (400, "unauthorized_client", f"AADSTS700016: Application '{str(form.get('client_id'))[:40]}' "
                                                   "was not found in the directory")
        elif form.get("client_secret") != self.app_password:
            problem = (401, "invalid_client", "AADSTS7000215: Invalid client secret provided.")
        elif form.get("scope") != CONNECTOR_SCOPE:
            problem = (400, "invalid_scope", "AADSTS70011: The provided value for the input parameter 'scope' is "
                                             "not valid.")
        with self.mutate() as state:
            if problem is not None:
                state["stats"]["tokens_refused"] += 1
                return web.json_response({"error": problem[1], "error_description": problem[2]}, status=problem[0])
            token = "eyJfake." + secrets.token_urlsafe(32)
            state["tokens"][token] = time.time() + self.limits["token_lifetime"]
            state["stats"]["tokens_granted"] += 1
        return web.json_response({"token_type": "Bearer", "expires_in": self.limits["token_lifetime"],
                                  "ext_expires_in": self.limits["token_lifetime"], "access_token": token})

    async def attachment(self, request: web.Request) -> web.Response:
        """A user's pasted image, to a bearer of a live bot token."""
        with self.mutate() as state:
            if not self.authorised(state, request):
                return error(401, "Unauthorized", "Authorization has been denied for this request.")
            found = state["files"].get(request.match_info["attachment"])
            if found is None or request.match_info["view"] != "original":
                return error(404, "NotFound", "Attachment not found.")
        return web.Response(body=base64.b64decode(found["data"]), content_type=found["type"])

    def authorised(self, state: dict, request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        expires = state["tokens"].get(header[len("Bearer "):]) if header.startswith("Bearer ") else None
        if expires is not None and expires > time.time():
            return True
        state["stats"]["auth_failures"] += 1
        return False

    def writer(self, method: str):
        async def handler(request: web.Request) -> web.Response:
            conversation = unquote(request.match_info["conversation"])
            body = None
            if method != "delete":
                try:
                    body = await request.json()
                except ValueError:
                    body = None
            # A typing activity is POSTed like a message and shows nothing: logged as its own method.
            method_now = "typing" if isinstance(body, dict) and body.get("type") == "typing" else method
            now = time.time()
            chat = conversation.split(";")[0]
            with self.mutate() as state:
                if not self.authorised(state, request):
                    self._log(state, method_now, conversation, 401, now)
                    return error(401, "Unauthorized", "Authorization has been denied for this request.")
                fault = self.faults.draw(method_now)
                if fault == "drop":
                    self._log(state, method_now, conversation, 599, now)
                    return drop_connection(request)
                if fault == "flood" or (fault is None and self.gates.ban_remaining([chat], now) > 0):
                    if fault is None:
                        state["stats"]["retry_after_violations"] += 1
                    else:
                        self.gates.ban(chat, now, self.faults.flood_retry_after)
                    return self._flooded(state, method_now, conversation, now, self.faults.flood_retry_after)
                if fault is None and self._over_pace(state, chat, now):
                    state["stats"]["pace_violations"] += 1
                    return self._flooded(state, method_now, conversation, now, 1.0)
                if fault == "error":
                    self._log(state, method_now, conversation, 500, now)
                    return error(500, "ServiceError", "Unknown error")
                status, answer = self._write(state, method_now, conversation, request, body, now)
                self._log(state, method_now, conversation, status, now)
            await self.hold_if_asked(method_now, chat, fault is None and status in (200, 201))
            if fault == "drop_after":
                return drop_connection(request)
            if status not in (200, 201):
                return error(status, answer[0], answer[1])
            return web.json_response(answer, status=status)
        return handler

    def _flooded(self, state: dict, method: str, conversation: str, now: float, retry_after: float) -> web.Response:
        state["stats"]["flood_served"] += 1
        self._log(state, method, conversation, 429, now)
        return error(429, "TooManyRequests", "Too many requests for this conversation",
                     headers={"Retry-After": f"{retry_after:g}"})

    def _over_pace(self, state: dict, chat: str, now: float) -> bool:
        """Teams' per bot per conversation limits: an operation past any window's count is a 429."""
        windows = self.limits["thread_windows"]
        longest = max(seconds for seconds, _ in windows)
        recent = [t for t in state["writes"].get(chat, []) if now - t < longest]
        state["writes"][chat] = recent
        return any(sum(1 for t in recent if now - t < seconds) >= count for seconds, count in windows)

    def _write(self, state: dict, method: str, conversation: str, request: web.Request, body, now: float) -> tuple:
        chat = conversation.split(";")[0]
        if chat not in state["conversations"]:
            return 404, ("ConversationNotFound", "Conversation not found.")
        state["writes"].setdefault(chat, []).append(now)
        if method == "typing":
            state["stats"]["typings"] += 1
            return 200, {}
        shown = state["activities"].setdefault(conversation, [])
        if method in ("send", "reply"):
            return self._create(state, method, conversation, shown, request, body, now)
        activity_id = unquote(request.match_info["activity"])
        activity = next((a for a in shown if a["id"] == activity_id and not a["deleted"]), None)
        if activity is None:
            return 404, ("ActivityNotFound", "Activity not found.")
        if method == "delete":
            activity["deleted"] = True
            state["stats"]["deletes"] += 1
            return 200, {}
        problem = self._text_problem(body, self._personal(state, chat))
        if problem:
            return problem
        activity["text"], activity["edits"] = body.get("text", ""), activity["edits"] + 1
        activity["attachments"] = body.get("attachments") or []   # an update replaces the whole activity
        state["stats"]["updates"] += 1
        return 200, {"id": activity_id}

    def _create(self, state: dict, method: str, conversation: str, shown: list, request: web.Request, body,
                now: float) -> tuple:
        problem = self._text_problem(body, self._personal(state, conversation.split(";")[0]))
        if problem:
            return problem
        reply_to = unquote(request.match_info["activity"]) if method == "reply" else None
        thread = conversation.split(";messageid=")[1] if ";messageid=" in conversation else reply_to
        activity_id = str(1_700_000_000_000 + state["next_activity"])
        state["next_activity"] += 1
        shown.append({"id": activity_id, "text": body.get("text", ""), "reply_to": reply_to or body.get("replyToId"),
                      "thread": thread, "deleted": False, "edits": 0, "at": now,
                      "text_format": body.get("textFormat"), "attachments": body.get("attachments") or []})
        state["stats"]["replies" if method == "reply" else "sends"] += 1
        return 201, {"id": activity_id}

    @staticmethod
    def _personal(state: dict, chat: str) -> bool:
        return state["conversations"].get(chat, {}).get("conversationType") == "personal"

    def _text_problem(self, body, personal: bool) -> Optional[tuple]:
        if not isinstance(body, dict) or body.get("type") != "message":
            return 400, ("BadArgument", "Activity type must be message")
        text = body.get("text", "" if body.get("attachments") else None)
        if not isinstance(text, str) or not (text or body.get("attachments")):
            return 400, ("BadArgument", "Message text is empty")
        if len(text) > self.limits["text_limit"] or len(json.dumps(body)) > MESSAGE_BYTES:
            return 413, ("MessageSizeTooBig", "Message size too large")
        return self._attachments_problem(body, personal)

    @staticmethod
    def _attachments_problem(body: dict, personal: bool) -> Optional[tuple]:
        attachments = body.get("attachments", [])
        if not isinstance(attachments, list) or not all(isinstance(a, dict) for a in attachments):
            return 400, ("BadArgument", "attachments must be a list of objects")
        for image in [a for a in attachments if a.get("contentType") in IMAGE_TYPES]:
            if image_bytes(image) is None:
                return 400, ("BadArgument", "an inline image's contentUrl must be a base64 data URI of its type")
        for card in [a for a in attachments if a.get("contentType") in FILE_CARDS]:
            if (problem := card_problem(card, personal)) is not None:
                return 400, ("BadArgument", problem)
        cards = [a for a in attachments if a.get("contentType") not in IMAGE_TYPES + FILE_CARDS]
        if not all(a.get("contentType") == CARD_TYPE and isinstance(a.get("content"), dict)
                   and a["content"].get("type") == "AdaptiveCard" for a in cards):
            return 400, ("BadArgument", f"attachments must be {CARD_TYPE} cards, file cards or inline images")
        for card in cards:
            for action in card["content"].get("actions", []):
                if not (isinstance(action, dict) and action.get("type") in ("Action.Submit", "Action.OpenUrl")
                        and isinstance(action.get("title"), str)):
                    return 400, ("BadArgument", "an action needs a type and a title")
        return None

    def _log(self, state: dict, method: str, conversation: str, status: int, now: float) -> None:
        state["ops"].append({"method": method, "conversation": conversation, "at": now, "status": status})

    def __repr__(self) -> str:
        return f"FakeTeams(port={self.port})"
