"""``/model``: which model a conversation runs on. Pure functions (the session's handler is in session_commands.py).

The choice is a fact of the conversation: a ``system`` event of kind ``model`` in its transcript, so it survives a
restart and a kill -9 (the append is committed before the chat is answered) and travels with the session when it
moves to another host (the transcript is what an export carries: storage/moving.py). A new conversation (``/new``)
starts on the profile's default model. The session cell reads the choice once and keeps it
(``session_commands.chosen_model``); each turn asks the profile's allowed models again, so a choice a reload no
longer allows falls back to the default.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from actors.profiles.model_buttons import SWITCH_HINT

MODEL_EVENT = "model"            # the transcript event kind that holds a choice
SHOWN_NAME_CHARS = 60            # how much of an unknown name the answer repeats


@dataclass(frozen=True)
class ModelAnswer:
    text: str                    # what the chat is told
    chosen: Optional[str] = None  # the model to record, when the command set one


def choice_event(model: str) -> dict:
    """The transcript event that records ``model`` as the conversation's model."""
    return {"role": "system", "kind": MODEL_EVENT, "turn_id": None, "payload": {"model": model}}


def chosen_in(event) -> Optional[str]:
    """The model a ``choice_event`` read back names, or None."""
    model = event.payload.get("model") if event is not None and isinstance(event.payload, dict) else None
    return model if isinstance(model, str) and model else None


def effective_model(profile, chosen: Optional[str]) -> Optional[str]:
    """The model the next turn asks for: the choice while the profile allows it, else the profile's default."""
    return chosen if chosen in profile.allowed_models() else profile.default_model


def model_command(profile, chosen: Optional[str], args: str) -> ModelAnswer:
    """What ``/model`` (no argument: show and list) or ``/model NAME`` (choose) answers, and what it records."""
    allowed = profile.allowed_models()
    if not allowed:
        return ModelAnswer("This conversation's agent has no model to choose from.")
    current = effective_model(profile, chosen)
    listing = _listing(allowed, current, profile.default_model)
    name = args.strip()
    if not name:
        if len(allowed) == 1:
            return ModelAnswer(f"Model: {current}. This profile offers no other model.")
        return ModelAnswer(f"Model: {current}.\n{listing}\n{SWITCH_HINT}")
    if name not in allowed:
        shown = name if len(name) <= SHOWN_NAME_CHARS else name[:SHOWN_NAME_CHARS - 1] + "\u2026"
        return ModelAnswer(f"\u201c{shown}\u201d is not a model this profile allows.\n{listing}")
    # The same answer when it is current already: a command run again after a crash answers as the first run did.
    return ModelAnswer(f"Switched to {name}: the next answer uses it.", chosen=None if name == current else name)


def _listing(allowed: tuple, current: Optional[str], default: Optional[str]) -> str:
    lines = ["Models:"]
    for model in allowed:
        marks = [mark for mark, on in (("current", model == current), ("default", model == default)) if on]
        lines.append(f"- {model}" + (f" ({', '.join(marks)})" if marks else ""))
    return "\n".join(lines)

