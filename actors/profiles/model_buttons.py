"""``/model``'s listing with a button per model to switch to, where the platform has buttons (the session's
command: actors/sessions/model_choice.py): pure functions the adapters use. A press is the presser's ``/model NAME``
in the button's chat, so the session checks it exactly as the typed command (an unknown or no longer allowed name is
answered so), and anyone who may write there may press.
"""
from __future__ import annotations

import re
from typing import Optional

SWITCH_HINT = "Send /model NAME to switch."     # the listing's last line: what marks it as one (model_buttons)
BUTTON_PREFIX = "md:"
MAX_BUTTON_DATA_BYTES = 64       # Telegram's callback_data: a model whose name does not fit gets no button
MAX_MODEL_BUTTONS = 10
LISTED = re.compile(r"^- (\S+)(?: \(([a-z, ]+)\))?$")


def model_buttons(text: str) -> tuple:
    """The buttons of ``/model``'s listing (``text`` as the chat is sent it: the delivery ledger's chunk, so a send
    again after a crash carries the same ones): ((name, data), ...) for each model listed but the current one, whose
    data fits every platform's; () for any other text."""
    if not isinstance(text, str) or not text.rstrip().endswith(SWITCH_HINT):
        return ()
    buttons = []
    for line in text.splitlines():
        found = LISTED.match(line)
        if found is None or "current" in (found.group(2) or ""):
            continue
        data = BUTTON_PREFIX + found.group(1)
        if len(data.encode("utf-8")) <= MAX_BUTTON_DATA_BYTES:
            buttons.append((found.group(1), data))
    return tuple(buttons[:MAX_MODEL_BUTTONS])


def model_of_button(data: str) -> Optional[str]:
    """The model a ``model_buttons`` button names, None for other data; the session checks it is allowed (the
    press is the presser's ``/model NAME``)."""
    if not isinstance(data, str) or not data.startswith(BUTTON_PREFIX) or len(data) > MAX_BUTTON_DATA_BYTES:
        return None
    name = data[len(BUTTON_PREFIX):]
    return name if name and not any(c.isspace() for c in name) else None
