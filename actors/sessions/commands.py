"""Slash commands typed in a chat: parsing and the texts the gateway answers with. Pure functions."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Optional

# Canonical name -> one-line description, in the order help lists them.
KNOWN_COMMANDS: dict[str, str] = {
    "new": "start a fresh conversation (alias /reset)",
    "stop": "stop the answer in progress",
    "status": "show what this conversation is doing",
    "retry": "answer your last message again",
    "undo": "forget the last exchange",
    "queue": "show the messages waiting for an answer",
    "model": "show the models you may pick; /model NAME switches",
    "bg": "run a prompt as a background task: /bg PROMPT; its result comes here when done",
    "tasks": "list this chat's background tasks; /tasks N shows one",
    "cancel": "stop a background task: /cancel N",
    "watches": "list the pages the agent watches for this chat",
    "unwatch": "stop one of them: /unwatch N",
    "help": "list the commands",
}
ALIASES: dict[str, str] = {"reset": "new"}

# "/name", "/name@bot", then whitespace or the end. "/etc/hosts" or "/ 2" are not commands.
_COMMAND = re.compile(r"^/([A-Za-z0-9_]{1,64})(?:@([A-Za-z0-9_]{1,64}))?(?=\s|$)\s*(.*)$", re.S)


@dataclass(frozen=True)
class Command:
    name: str                      # lowercased; an alias is resolved to its canonical name
    args: str = ""                 # everything after the name, stripped
    typed: str = ""                # the name as the user typed it, lowercased (e.g. "reset")
    bot: Optional[str] = None      # the @botname the command was addressed to, if any

    @property
    def known(self) -> bool:
        return self.name in KNOWN_COMMANDS


def parse_command(text: str, bot_username: Optional[str] = None) -> Optional[Command]:
    """Parse ``text`` as a slash command, or return None if it is ordinary text.

    With ``bot_username`` set, a command addressed to another bot (``/stop@other_bot``) is not ours: None.
    """
    match = _COMMAND.match(text.strip())
    if match is None:
        return None
    typed, bot, args = match.group(1).lower(), match.group(2), match.group(3).strip()
    if bot and bot_username and bot.lower() != bot_username.lstrip("@").lower():
        return None
    return Command(name=ALIASES.get(typed, typed), args=args, typed=typed, bot=bot)


def help_text() -> str:
    lines = ["Commands:"]
    aliases_of = {canonical: alias for alias, canonical in ALIASES.items()}
    for name, description in KNOWN_COMMANDS.items():
        alias = f" (or /{aliases_of[name]})" if name in aliases_of else ""
        lines.append(f"/{name}{alias} - {description.split(' (alias')[0]}")
    return "\n".join(lines)


def suggest_command(name: str) -> Optional[str]:
    """The known command (or alias) closest to ``name``, if any is close enough to be a likely typo."""
    candidates = list(KNOWN_COMMANDS) + list(ALIASES)
    matches = difflib.get_close_matches(name.lower(), candidates, n=1, cutoff=0.6)
    return matches[0] if matches else None


def unknown_command_reply(name: str) -> str:
    known = ", ".join(f"/{n}" for n in KNOWN_COMMANDS)
    suggestion = suggest_command(name)
    hint = f" Did you mean /{suggestion}?" if suggestion else ""
    return f"Unknown command /{name}.{hint} Known commands: {known}. Send /help for details."
