"""XMPP: one account on one server (RFC 6120/6121), one-to-one chats and rooms (XEP-0045), through slixmpp (README.md
beside this file). Anyone on the federation can write to the account: only the JIDs of ``allow`` are answered
unless the table says otherwise.

Pacing: a body is limited by the server's stanza size (Prosody: 256 KiB by default), far above what a chat shows
well: 10,000 characters per part. Replies stream as corrections of one message (XEP-0308: each correction carries
the whole text), one every 2 s at most, where the peer's client shows corrections; otherwise the answer goes whole
once it is final. Servers limit a connection's bytes, not its messages; the per-chat budget keeps one chat from
taking the whole stream.

Files go by HTTP upload (XEP-0363) where the server offers it; a send on a server without the service is refused
("not supported here"): the capability is the platform's, the service is the server's."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=True, delete=True, threads=False, reactions=False, files_in=True, files_out=True,
                            voice=False, buttons=False, typing=True)


def _xmpp_problems(table):
    jid = table["jid"]
    if not isinstance(jid, str) or jid.count("@") != 1 or "/" in jid or not all(jid.split("@")):
        return "jid", f"{jid!r} is no bare JID (\"name@example.org\")"
    for room in table["rooms"]:
        if not isinstance(room, str) or room.count("@") != 1 or "/" in room or not all(room.split("@")):
            return "rooms", f"{room!r} is no room JID (\"room@conference.example.org\")"
    if not table["nick"].strip() or "/" in table["nick"]:
        return "nick", f"{table['nick']!r} is no room nick"
    if table["max_invited_rooms"] < 0:
        return "max_invited_rooms", "must be 0 or more"
    if table["ping_timeout_s"] <= table["ping_interval_s"]:
        return "ping_timeout_s", "must be longer than ping_interval_s (the ping goes first, then the wait)"
    return None


PLATFORM = Platform(
    type="xmpp", actor="actors.adapters.xmpp.adapter.XmppAdapter",
    summary="XMPP (Jabber): chats and rooms, STARTTLS + SASL, stream resumption, corrections as edits",
    intake="socket", capabilities=CAPABILITIES, access="allowlist",
    pacing=paced("xmpp", CAPABILITIES, 10000, "chars", edit_interval_s=2.0, min_edit_delta_chars=40,
                 per_chat_ops_per_s=1.0, per_chat_burst=5, typing_interval_s=20.0),
    options={
        "jid": Option(str, doc="the bot's account, a bare JID (\"bot@example.org\")"),
        "password": Option(str, secret=True, doc="its password (SASL, over TLS only)"),
        "host": Option(str, "", doc="the server to connect to (empty: the JID's domain, from DNS SRV records)"),
        "port": Option(int, 5222, doc="its client port"),
        "direct_tls": Option(bool, False, doc="TLS from the first byte (port 5223 on many servers) instead of "
                                              "STARTTLS"),
        "ca_file": Option(str, "", doc="a CA certificate file (PEM) to trust besides the system's: a server with a "
                                       "certificate of its own; verification is never off"),
        "nick": Option(str, "gateway", doc="the bot's nick in rooms (answered when mentioned by it)"),
        "rooms": Option(list, [], doc="rooms to join (\"room@conference.example.org\")"),
        "join_on_invite": Option(str, "allowlist", allowed=("allowlist", "anyone", "off"),
                                 doc="join a room on an invitation (XEP-0045 mediated, XEP-0249 direct): "
                                     "\"allowlist\" from someone the access rules admit, \"anyone\", \"off\""),
        "max_invited_rooms": Option(int, 50, doc="rooms joined by invitation at most (kept across restarts)"),
        "http_file_origins": Option(list, [], doc="plain-HTTP origins (\"http://127.0.0.1:7280\") of an upload "
                                    "service without TLS on this machine, from which users' files are fetched too "
                                    "(https links are fetched from the JID's domain and host only)"),
        "require_mention": Option(bool, True, doc="in rooms answer only messages that mention the nick"),
        "corrections": Option(str, "auto", allowed=("auto", "always", "never"),
                              doc="stream replies as corrections (XEP-0308): \"auto\" where the peer's client says "
                                  "it shows them (rooms: always), \"always\", \"never\""),
        "priority": Option(int, 1, doc="the presence priority of the bot's resource"),
        "connect_timeout_s": Option(float, 30.0, doc="connecting and logging in, at most"),
        "ping_interval_s": Option(float, 60.0, doc="ping the server after this much silence"),
        "ping_timeout_s": Option(float, 120.0, doc="nothing from the server for this long: the connection is dead"),
        "send_wait_s": Option(float, 30.0, doc="a reply waits this long for the connection (and the room) and the "
                                               "server's acknowledgement"),
        "max_queued_messages": Option(int, 1000, doc="received messages waiting for the inbox at most (a flood "
                                                     "beyond is dropped)"),
    },
    checks=(_xmpp_problems,))
