"""Messages: inbound (the rules every message keeps: actors/messages/__init__.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Source:
    """Where a message came from: the identity a session key is derived from (see storage.keys)."""
    platform: str
    chat_id: str
    chat_type: str = "dm"          # dm | group | channel | thread
    thread_id: Optional[str] = None
    user_id: Optional[str] = None
    user_name: Optional[str] = None
    profile: str = "default"
    # The guild, workspace or server the chat belongs to, where the platform has one (Discord guild_id, Slack
    # team_id): what a route's ``community`` matches (actors/profiles/routes.py). Not part of the session key.
    community: Optional[str] = None


ATTACHMENT_KINDS = ("photo", "document", "voice", "audio", "video")


@dataclass(frozen=True)
class Attachment:
    """A file that came with a message (docs/media.md). ``normalise`` makes it ``pending`` with the platform's
    handle (``ref``) and what the platform claims; the intake fetches it before the row is stored, after which it is
    ``cached`` (``cache_key`` names its bytes in the media cache, ``mime`` and ``size`` are the bytes' own, sniffed,
    never the platform's), ``too_large`` (nothing was fetched) or ``unavailable`` (every try failed: the turn runs
    with a note saying so)."""
    kind: str                      # photo | document | voice | audio | video
    mime: str = ""                 # sniffed from the bytes (actors/media/sniff.py); "" until cached
    size: int = 0                  # bytes: the platform's figure while pending, the real one once cached
    cache_key: str = ""            # SHA-256 hex of the bytes (storage/media.py)
    name: str = ""                 # display name, sanitised (actors/media/names.py): never a path
    caption: str = ""
    state: str = "pending"         # pending | cached | too_large | unavailable
    ref: str = ""                  # the platform's handle to fetch it by (Telegram: file_id)
    width: int = 0                 # pixels, for images and videos (the image's own once cached)
    height: int = 0
    duration_s: int = 0            # voice, audio, video: as the platform gives it

    @classmethod
    def from_payload(cls, payload) -> "Attachment":
        if isinstance(payload, Attachment):
            return payload
        known = {k: v for k, v in dict(payload).items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass(frozen=True)
class MessageEvent:
    """One platform event, normalised. Adapters produce it; the inbox stores it; the session consumes it."""
    source: Source
    text: str
    platform_message_id: str
    received_at: float
    reply_to_message_id: Optional[str] = None
    attachments: tuple = ()        # of Attachment
    internal: bool = False         # produced by the gateway itself (a scheduled run): not user traffic
    # When the sender sent it, by the platform's own server clock (Telegram's ``date``); None where the platform
    # gives no such time or the client chooses it. Sender limits charge a message at this time, so a backlog the
    # platform held while the gateway was down is not mistaken for a burst (sender_limits.charge_time).
    sent_at: Optional[float] = None
    # Whether a group message is addressed to the bot (mentions it, replies to it); None where the adapter does not
    # say (its own filter decided). A route answering only addressed messages drops those that are False.
    addressed: Optional[bool] = None

    def to_payload(self) -> dict:
        """The inbox record: plain values only (msgpack)."""
        return {"source": dict(vars(self.source)), "text": self.text, "platform_message_id":
                self.platform_message_id, "received_at": self.received_at, "reply_to_message_id":
                self.reply_to_message_id, "attachments": [dict(vars(a)) for a in self.attachments],
                "internal": self.internal, "sent_at": self.sent_at, "addressed": self.addressed}

    @classmethod
    def from_payload(cls, payload: dict) -> "MessageEvent":
        return cls(source=Source(**payload["source"]), text=payload.get("text", ""),
                   platform_message_id=str(payload["platform_message_id"]),
                   received_at=payload.get("received_at", 0.0),
                   reply_to_message_id=payload.get("reply_to_message_id"),
                   attachments=tuple(Attachment.from_payload(a) for a in payload.get("attachments") or ()),
                   internal=payload.get("internal", False), sent_at=payload.get("sent_at"),
                   addressed=payload.get("addressed"))


@dataclass(frozen=True)
class InboxDoorbell:
    """Adapter -> session supervisor -> session: new rows are durable in this session's inbox. A doorbell carries
    no content: the inbox is the truth, so a lost doorbell delays a message but never loses it. ``internal``: rung
    for a row the gateway wrote itself (a scheduled run), which is no user activity: it does not keep a session
    from passivating."""
    session_key: str
    seq: int = 0
    internal: bool = False


@dataclass(frozen=True)
class StoreInbound:
    """Adapter -> a session shard on another host (docs/distribution.md): store these rows in your own inbox and
    ring their sessions. ``rows``: ((seq here, session_key, platform, platform_message_id, payload), ...), committed
    in the adapter's database already; the shard dedups them by (platform, message id), so sending them again
    (a lost answer, a restarted shard) costs a look, never a second row."""
    rows: tuple


@dataclass(frozen=True)
class InboundStored:
    """Session shard -> the adapter that sent StoreInbound: these rows (the adapter's seqs) are committed in the
    shard's inbox; the adapter may mark them forwarded."""
    seqs: tuple
    shard: str


