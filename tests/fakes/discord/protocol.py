"""Numbers of the Discord wire format the fake speaks: gateway opcodes, close codes, intents, the JSON error codes
it answers with, and the Snowflake id format. Values are Discord's (API v10), not the fake's choice."""
from __future__ import annotations

import datetime
import time

API_VERSIONS = (9, 10)  # "Available" in Discord's version table; 6-8 are deprecated, older discontinued

# -- gateway opcodes
DISPATCH, HEARTBEAT, IDENTIFY, PRESENCE_UPDATE, VOICE_STATE_UPDATE = 0, 1, 2, 3, 4
RESUME, RECONNECT, REQUEST_GUILD_MEMBERS, INVALID_SESSION, HELLO, HEARTBEAT_ACK = 6, 7, 8, 9, 10, 11
REQUEST_SOUNDBOARD_SOUNDS, REQUEST_CHANNEL_INFO = 31, 43
# Send events accepted (and ignored) once identified; anything else is an unknown opcode.
IGNORED_SEND_OPS = (PRESENCE_UPDATE, VOICE_STATE_UPDATE, REQUEST_GUILD_MEMBERS, REQUEST_SOUNDBOARD_SOUNDS,
                    REQUEST_CHANNEL_INFO)
MAX_SEND_PAYLOAD = 4096  # bytes; a larger payload from the client closes the connection with 4002

# -- gateway close codes: (description, whether Discord says to reconnect)
CLOSE_CODES = {
    4000: ("Unknown error", True),
    4001: ("Unknown opcode", True),
    4002: ("Decode error", True),
    4003: ("Not authenticated", True),
    4004: ("Authentication failed", False),
    4005: ("Already authenticated", True),
    4007: ("Invalid seq", True),
    4008: ("Rate limited", True),
    4009: ("Session timed out", True),
    4010: ("Invalid shard", False),
    4011: ("Sharding required", False),
    4012: ("Invalid API version", False),
    4013: ("Invalid intent(s)", False),
    4014: ("Disallowed intent(s)", False),
}
NOT_RECONNECTABLE = frozenset(code for code, (_, again) in CLOSE_CODES.items() if not again)
# A client closing with these ends its session ("your session will be invalidated and your bot will appear offline").
SESSION_ENDING_CLIENT_CODES = (1000, 1001)

# -- intents
INTENTS = {
    "GUILDS": 1 << 0, "GUILD_MEMBERS": 1 << 1, "GUILD_MODERATION": 1 << 2, "GUILD_EXPRESSIONS": 1 << 3,
    "GUILD_INTEGRATIONS": 1 << 4, "GUILD_WEBHOOKS": 1 << 5, "GUILD_INVITES": 1 << 6, "GUILD_VOICE_STATES": 1 << 7,
    "GUILD_PRESENCES": 1 << 8, "GUILD_MESSAGES": 1 << 9, "GUILD_MESSAGE_REACTIONS": 1 << 10,
    "GUILD_MESSAGE_TYPING": 1 << 11, "DIRECT_MESSAGES": 1 << 12, "DIRECT_MESSAGE_REACTIONS": 1 << 13,
    "DIRECT_MESSAGE_TYPING": 1 << 14, "MESSAGE_CONTENT": 1 << 15, "GUILD_SCHEDULED_EVENTS": 1 << 16,
    "AUTO_MODERATION_CONFIGURATION": 1 << 20, "AUTO_MODERATION_EXECUTION": 1 << 21,
    "GUILD_MESSAGE_POLLS": 1 << 24, "DIRECT_MESSAGE_POLLS": 1 << 25,
}
KNOWN_INTENT_BITS = sum(INTENTS.values())
PRIVILEGED_INTENTS = INTENTS["GUILD_MEMBERS"] | INTENTS["GUILD_PRESENCES"] | INTENTS["MESSAGE_CONTENT"]
# Application flags that say a privileged intent is enabled in the Developer Portal.
APPLICATION_INTENT_FLAGS = {INTENTS["GUILD_PRESENCES"]: 1 << 12, INTENTS["GUILD_MEMBERS"]: 1 << 14,
                            INTENTS["MESSAGE_CONTENT"]: 1 << 18}


def intent_bits(value) -> int:
    """An intents value given as an int or as a list of intent names (control API convenience)."""
    if isinstance(value, (list, tuple)):
        unknown = [name for name in value if name not in INTENTS]
        if unknown:
            raise ValueError(f"unknown intents {unknown}")
        return sum(INTENTS[name] for name in set(value))
    return int(value)


# -- channel and message types
GUILD_TEXT, DM, PUBLIC_THREAD = 0, 1, 11
MESSAGE_DEFAULT, MESSAGE_REPLY = 0, 19

# -- JSON error codes used by the fake (Discord's table)
GENERAL_ERROR = 0
UNKNOWN_CHANNEL, UNKNOWN_MESSAGE, UNKNOWN_USER = 10003, 10008, 10013
CANNOT_ACT_ON_DM, CANNOT_EDIT_OTHERS_MESSAGE, EMPTY_MESSAGE = 50003, 50005, 50006
CANNOT_MESSAGE_USER, NON_TEXT_CHANNEL, MISSING_PERMISSIONS = 50007, 50008, 50013
INVALID_FORM_BODY, INVALID_JSON = 50035, 50109
UNKNOWN_INTERACTION, INTERACTION_ALREADY_ACKNOWLEDGED = 10062, 40060

# -- message components and interactions
ACTION_ROW, BUTTON = 1, 2
BUTTON_STYLES = (1, 2, 3, 4)          # Primary, Secondary, Success, Danger (5, Link, carries a url, no custom_id)
MAX_ACTION_ROWS, MAX_ROW_BUTTONS, MAX_CUSTOM_ID, MAX_BUTTON_LABEL = 5, 5, 100, 80
MESSAGE_COMPONENT_INTERACTION = 3
# Callback types a component interaction takes: CHANNEL_MESSAGE_WITH_SOURCE, DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE,
# DEFERRED_UPDATE_MESSAGE, UPDATE_MESSAGE, MODAL
COMPONENT_CALLBACK_TYPES = (4, 5, 6, 7, 9)
EPHEMERAL_FLAG = 1 << 6

# -- snowflakes: 42 bits of milliseconds since the Discord epoch, 5 worker, 5 process, 12 increment
DISCORD_EPOCH_MS = 1420070400000
WORKER_ID, PROCESS_ID = 1, 1


def next_snowflake(state: dict) -> int:
    """A new id, strictly greater than every id this fake made before (kept in ``state["last_snowflake"]``)."""
    stamp = int(time.time() * 1000) - DISCORD_EPOCH_MS
    candidate = (stamp << 22) | (WORKER_ID << 17) | (PROCESS_ID << 12)
    state["last_snowflake"] = max(candidate, state["last_snowflake"] + 1)
    return state["last_snowflake"]


def snowflake_time(snowflake: int) -> float:
    return ((int(snowflake) >> 22) + DISCORD_EPOCH_MS) / 1000.0


def iso_timestamp(epoch_seconds: float) -> str:
    """Discord's ISO8601 form: ``2026-12-01T20:11:49.123000+00:00``."""
    return datetime.datetime.fromtimestamp(epoch_seconds, datetime.timezone.utc).isoformat(timespec="microseconds")
