"""The Events API over HTTP: events POSTed to a Request URL, signed, verified first with url_verification.

* ``set_request_url(url)`` first sends ``{"token", "challenge", "type": "url_verification"}``; the URL is taken
  only if it answers 200 with the challenge (as text/plain, ``challenge=…`` form or ``{"challenge": …}`` JSON).
  From then on events go there instead of the sockets; ``set_request_url(None)`` goes back to Socket Mode.
* Each delivery is a POST of the ``event_callback`` JSON with ``X-Slack-Request-Timestamp`` and
  ``X-Slack-Signature: v0=<hex HMAC-SHA256 of "v0:<timestamp>:<body>" under the signing secret>``.
* A 2xx within ``ack_timeout`` (3 s) acknowledges it. Otherwise Slack retries with ``X-Slack-Retry-Num`` (1, 2, 3)
  and ``X-Slack-Retry-Reason`` (``http_timeout`` when no answer came in time, ``http_error`` for another status,
  ``connection_failed``); an error answer with ``X-Slack-No-Retry: 1`` asks for no retry. On a timeout the request
  is abandoned, as Slack does not wait for it before retrying.
* ``signature_headers(body, timestamp=…, secret=…)`` signs any body, so a test can forge a request with a wrong
  secret or an old timestamp and check that the app refuses it.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import uuid
from typing import Optional
from urllib.parse import parse_qs

import aiohttp


class HttpEventMethods:
    """Mixin for FakeSlack: needs ``self.identity``, ``self.limits``, ``self.settle``/``fail_attempt``."""

    def signature_headers(self, body: bytes, timestamp: Optional[float] = None,
                          secret: Optional[str] = None) -> dict:
        stamp = str(int(time.time() if timestamp is None else timestamp))
        key = (self.identity["signing_secret"] if secret is None else secret).encode()
        digest = hmac.new(key, b"v0:" + stamp.encode() + b":" + body, hashlib.sha256).hexdigest()
        return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest}"}

    async def verify_request_url(self, url: Optional[str]) -> dict:
        """url_verification, then (on the challenge coming back) events go to ``url``; None: back to sockets."""
        if url is None:
            with self.mutate() as state:
                state["request_url"] = None
            return {"verified": None}
        challenge = uuid.uuid4().hex
        body = json.dumps({"token": self.identity["verification_token"], "challenge": challenge,
                           "type": "url_verification"}).encode()
        status, answer = None, ""
        try:
            async with self.http_session().post(
                    url, data=body, timeout=aiohttp.ClientTimeout(total=self._http_timeout()),
                    headers={"Content-Type": "application/json", **self.signature_headers(body)}) as resp:
                status, answer = resp.status, await resp.text()
        except (asyncio.TimeoutError, aiohttp.ClientError) as exc:
            answer = type(exc).__name__
        verified = status == 200 and challenge in _challenges(answer)
        with self.mutate() as state:
            state["url_verifications"].append({"url": url, "at": time.time(), "status": status,
                                               "verified": verified})
            if verified:
                state["request_url"] = url
        return {"verified": verified, "status": status, "answer": answer[:200]}

    async def post_event(self, url: str, event_id: str, attempt_id: str, payload: dict, retry_num: int,
                         retry_reason: str) -> None:
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", **self.signature_headers(body)}
        if retry_num:
            headers.update({"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": retry_reason})
        status, failure = None, None
        try:
            async with self.http_session().post(url, data=body, headers=headers,
                                                timeout=aiohttp.ClientTimeout(total=self._http_timeout())) as resp:
                status = resp.status
                await resp.read()
                if not 200 <= status < 300:
                    failure = "no_retry" if resp.headers.get("X-Slack-No-Retry") == "1" else "http_error"
        except asyncio.TimeoutError:
            failure = "http_timeout"
        except aiohttp.ClientError:
            failure = "connection_failed"
        with self.mutate() as state:
            found = next(((ev, at) for ev in reversed(state["events"]) if ev["event_id"] == event_id
                          for at in ev["attempts"] if at["envelope_id"] == attempt_id), None)
            if found is None:  # the state was reset meanwhile
                return
            event, attempt = found
            attempt.update(status=status, failure=failure, answered_at=time.time())
            if failure is None:
                self.settle(state, event, attempt)
            else:
                state["stats"]["http_failures"] += 1
                self.fail_attempt(state, event, attempt, failure)

    def _http_timeout(self) -> float:
        return self.limits["ack_timeout"] * self.limits["time_scale"]

    def http_session(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession()
        return self._http

    def spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close_http(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.close()


def _challenges(answer: str) -> set[str]:
    """The challenge as the app may answer it: the plain text, a form field, or a JSON field."""
    found = {answer.strip()}
    found.update(parse_qs(answer).get("challenge", []))
    try:
        value = json.loads(answer)
        if isinstance(value, dict) and isinstance(value.get("challenge"), str):
            found.add(value["challenge"])
    except ValueError:
        pass
    return found
