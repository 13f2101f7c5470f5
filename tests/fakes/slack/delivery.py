"""Delivering queued events, over either transport, and Slack's redelivery rules.

An event is delivered once at a time: each attempt waits ``ack_timeout`` (3 s) for its acknowledgement (an
envelope ack on a socket, a 2xx answer on HTTP). A missed or failed attempt is followed by the next after
``retry_delays[n]`` (Slack: at once, after 1 minute, after 5 minutes), numbered by ``retry_attempt`` and carrying
the reason the previous one failed (``timeout`` on a socket; ``http_timeout``, ``http_error`` or
``connection_failed`` on HTTP). After the last retry the event is dropped (``status: "failed"``). An
acknowledgement of any attempt settles the event, one after its deadline counted as late.

Where events go: to the Request URL when one is set (httpevents.py), otherwise over the open sockets
(socketmode.py), each attempt to one of them in turn.

Each event record in the state: ``{"event_id", "payload", "status": "pending"|"acked"|"failed", "attempts":
[{"envelope_id", "retry_attempt", "retry_reason", "sent_at", "connection", "transport", "acked_at", ...}],
"due", "deadline", "failure", "acked"}``.
"""
from __future__ import annotations

import time
import uuid
from typing import Optional


class DeliveryMethods:
    """Mixin for FakeSlack: needs ``self.sockets``, ``self._send`` (socketmode), ``self.post_event`` (httpevents)."""

    async def deliver_events(self) -> None:
        """Background task: send what is due, time out what was not acknowledged, sleep until the next deadline."""
        while True:
            sends, posts, wake = self._plan_deliveries()
            for conn, envelope in sends:
                await self._send(conn, envelope)  # a failed send is a lost envelope: its deadline will pass
            for post in posts:
                self.spawn(self.post_event(*post))
            if not sends and not posts:
                await self.wait_for_change(wake)

    def _plan_deliveries(self) -> tuple[list, list, float]:
        limits, scale = self.limits, self.limits["time_scale"]
        ack_timeout, delays = limits["ack_timeout"] * scale, limits["retry_delays"]
        active = [c for c in self.sockets.values() if not c.draining and not c.silent and not c.ws.closed]
        sends, posts, wake, changed = [], [], 30.0, False
        with self._lock:
            state, now = self.state, time.time()
            url = state["request_url"]
            for event in state["events"]:
                if event["status"] != "pending":
                    continue
                if event["deadline"] is not None:
                    if now < event["deadline"]:
                        wake = min(wake, event["deadline"] - now)
                        continue
                    tried, changed = len(event["attempts"]), True
                    if tried > len(delays) or event["failure"] == "no_retry":
                        self._give_up(state, event)
                        continue
                    event["due"], event["deadline"] = event["deadline"] + delays[tried - 1] * scale, None
                if now < event["due"]:
                    wake = min(wake, event["due"] - now)
                    continue
                if url is not None and event.get("kind") == "interactive":
                    continue  # presses go to the Interactivity URL, not the events' Request URL (not modelled)
                if url is None and not active and limits["offline_delivery"] == "queue":
                    continue  # waits for a connection; connecting wakes this loop
                conn = None if url is not None or not active else active[self._next_socket % len(active)]
                self._next_socket += 1
                attempt = self._attempt(state, event, conn, "http" if url else "socket", now)
                event["deadline"], changed = now + ack_timeout, True
                wake = min(wake, ack_timeout)
                if url is not None:
                    posts.append((url, event["event_id"], attempt["envelope_id"], event["payload"],
                                  attempt["retry_attempt"], attempt["retry_reason"]))
                elif conn is not None:
                    sends.append((conn, self.envelope(event, attempt)))
        if changed:
            with self.mutate():  # persist and wake the waiters (this loop wakes once more and finds nothing)
                pass
        return sends, posts, max(wake, 0.0)

    def _attempt(self, state: dict, event: dict, conn, transport: str, now: float) -> dict:
        tried = len(event["attempts"])
        reason = "" if not tried else (event["failure"] or ("http_timeout" if transport == "http" else "timeout"))
        attempt = {"envelope_id": str(uuid.uuid4()), "retry_attempt": tried, "retry_reason": reason,
                   "sent_at": now, "transport": transport, "connection": conn.id if conn else None,
                   "acked_at": None}
        event["attempts"].append(attempt)
        event["failure"] = None
        stats = state["stats"]
        stats["deliveries_missed" if transport == "socket" and conn is None else
              "envelopes_sent" if transport == "socket" else "http_deliveries"] += 1
        if tried:
            stats["retries_sent"] += 1
        return attempt

    @staticmethod
    def envelope(event: dict, attempt: dict) -> dict:
        return {"envelope_id": attempt["envelope_id"], "payload": event["payload"],
                "type": event.get("kind", "events_api"),
                "accepts_response_payload": False, "retry_attempt": attempt["retry_attempt"],
                "retry_reason": attempt["retry_reason"]}

    def settle(self, state: dict, event: dict, attempt: dict, via: Optional[int] = None) -> None:
        """An attempt was acknowledged: the event is done (unless it already was, or was given up on)."""
        stats, now = state["stats"], time.time()
        if attempt["acked_at"] is not None or event["status"] == "acked":
            stats["duplicate_acks"] += 1
            attempt["acked_at"] = attempt["acked_at"] or now
            return
        attempt["acked_at"] = now
        stats["envelopes_acked"] += 1
        late = now > attempt["sent_at"] + self.limits["ack_timeout"] * self.limits["time_scale"]
        if late:
            stats["late_acks"] += 1
        if event["status"] == "pending":
            event.update(status="acked", deadline=None, acked={"envelope_id": attempt["envelope_id"], "at": now,
                                                               "late": late, "connection": via})

    def fail_attempt(self, state: dict, event: dict, attempt: dict, failure: str) -> None:
        """An HTTP attempt failed before its deadline: the next follows the retry schedule from now."""
        if event["status"] == "pending" and event["attempts"] and event["attempts"][-1] is attempt:
            event["failure"] = failure
            event["deadline"] = min(event["deadline"] or time.time(), time.time())

    @staticmethod
    def _give_up(state: dict, event: dict) -> None:
        event["status"], event["deadline"] = "failed", None
        state["stats"]["events_failed"] += 1
