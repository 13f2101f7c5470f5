"""An example agent-gateway plugin: a keyword filter before dispatch, an audit log after delivery.

The gateway makes ``KeywordFilter(options)`` once in each process that runs hooks (each adapter, each session shard,
the sweeper) and calls its methods on worker threads of its own, each call within a time bound
(docs/plugins.md). Its answers are the gateway's verdicts (actors/hooks/events.py), imported from the gateway
this plugin runs in.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import time

from actors.hooks.events import Answer, Drop, Rewrite


class KeywordFilter:
    def __init__(self, options: dict):
        self.blocked = [w.lower() for w in options.get("blocked", []) if isinstance(w, str) and w]
        self.blocked_reply = str(options.get("blocked_reply", ""))
        self.replace = {k: str(v) for k, v in dict(options.get("replace", {})).items() if k}
        self.audit_text = bool(options.get("audit_text", False))
        self.audit_path = os.path.join(options.get("plugin_dir") or ".", "audit.jsonl")

    # --------------------------------------------------------------------------------------------- the hooks
    def before_dispatch(self, message):
        lowered = message.text.lower()
        if any(re.search(r"\b" + re.escape(word) + r"\b", lowered) for word in self.blocked):
            return Answer(self.blocked_reply) if self.blocked_reply else Drop("blocked word")
        text = message.text
        for old, new in self.replace.items():
            text = re.sub(re.escape(old), new, text, flags=re.IGNORECASE)
        return Rewrite(text) if text != message.text else None

    def on_delivery(self, delivery):
        entry = {"ts": round(time.time(), 3), "adapter": delivery.adapter, "chat": delivery.chat_id,
                 "turn": delivery.turn_id, "by": delivery.by, "parts": len(delivery.message_ids),
                 "chars": len(delivery.text)}
        if self.audit_text:
            entry["text"] = delivery.text
        self._append(entry)

    # ---------------------------------------------------------------------------------------------- helpers
    def _append(self, entry: dict) -> None:
        """One line per entry, whole: several gateway processes append to the same file (a lock keeps lines whole)."""
        line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")
        fd = os.open(self.audit_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, line)
        finally:
            os.close(fd)
