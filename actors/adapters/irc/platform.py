"""IRC: one nick on one server, RFC 1459 / 2812 over asyncio streams (README.md beside this file). Anyone on the
network can write to the nick, and a nick is only as much of an identity as the network's services make it:
strangers get a pairing code unless the table says otherwise.

Pacing: no edits (the final answer goes once); a part is at most 400 bytes of UTF-8, sent as lines within 512 bytes
as relayed, prefix included (formatting.py). The server limits a connection, not a target: the binding bucket is the
adapter's, one for the whole connection, in lines (flood_lines_per_s, flood_burst: RFC 1459 §8.10's one message per
2 s after a burst). This per-target budget only keeps one busy channel from taking all of it."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=False, delete=False, threads=False, reactions=False, files_in=False,
                            files_out=False, voice=False, buttons=False, typing=False)


def _irc_problems(table):
    for key in ("nick", *(("alt_nicks",) if table["alt_nicks"] else ())):
        for nick in ([table[key]] if key == "nick" else table[key]):
            if not isinstance(nick, str) or not nick or any(c in nick for c in " ,:!@*?#&\r\n\0"):
                return key, f"{nick!r} is no IRC nick"
    for channel in table["channels"]:
        if not isinstance(channel, str) or channel[:1] not in "#&+!" or any(c in channel for c in ",\r\n\0\a"):
            return "channels", f"{channel!r} is no channel name (\"#name\" or \"#name key\")"
    if table["sasl_username"] and not table["sasl_password"]:
        return "sasl_password", "required with sasl_username"
    if table["flood_lines_per_s"] <= 0 or table["flood_burst"] < 1:
        return "flood_lines_per_s", "the flood bucket needs a positive rate and a burst of at least 1"
    if table["ping_timeout_s"] <= table["ping_interval_s"]:
        return "ping_timeout_s", "must be longer than ping_interval_s (the ping goes first, then the wait)"
    return None


PLATFORM = Platform(
    type="irc", actor="actors.adapters.irc.adapter.IrcAdapter",
    summary="IRC: one nick on one server (RFC 1459 / 2812), TLS and SASL", intake="socket",
    capabilities=CAPABILITIES, access="pairing",
    pacing=paced("irc", CAPABILITIES, 400, "bytes", edit_interval_s=0.0, min_edit_delta_chars=0,
                 per_chat_ops_per_s=1.0, per_chat_burst=5, typing_interval_s=None),
    options={
        "host": Option(str, doc="the IRC server's host name or address"),
        "port": Option(int, 6667, doc="its port (6697 is the usual one for TLS)"),
        "tls": Option(bool, False, doc="connect with TLS"),
        "tls_verify": Option(bool, True, doc="check the server's certificate (false only for a server of your own)"),
        "nick": Option(str, doc="the nick to register"),
        "alt_nicks": Option(list, [], doc="nicks to try when it is taken (then the nick with _ appended)"),
        "username": Option(str, "", doc="the user (ident) name (empty: the nick)"),
        "realname": Option(str, "agent gateway", doc="the real name shown by WHOIS"),
        "server_password": Option(str, "", secret=True, doc="the server's connection password (PASS), if it has one"),
        "sasl_username": Option(str, "", doc="the account for SASL PLAIN (empty: no SASL)"),
        "sasl_password": Option(str, "", secret=True, doc="its password"),
        "channels": Option(list, [], doc="channels to join (\"#name\" or \"#name key\"); answered when addressed "
                                         "by nick"),
        "flood_lines_per_s": Option(float, 0.5, doc="lines per second for the whole connection, after the burst"),
        "flood_burst": Option(int, 4, doc="lines that may go at once"),
        "connect_timeout_s": Option(float, 20.0, doc="connecting and registering, at most"),
        "ping_interval_s": Option(float, 60.0, doc="ping the server after this much silence"),
        "ping_timeout_s": Option(float, 120.0, doc="no data at all for this long: the connection is taken for dead"),
        "send_wait_s": Option(float, 30.0, doc="a reply waits this long for the connection (and the channel) to be "
                                               "back before the attempt counts as failed"),
        "max_queued_lines": Option(int, 1000, doc="received lines waiting for the inbox at most (a flood beyond is "
                                                  "dropped)"),
        "quit_message": Option(str, "gateway stopping", doc="the QUIT message at a stop"),
    },
    checks=(_irc_problems,))
