"""Callbacks as WeCom sends them to an application's URL ("接收消息与事件").

* ``verify_url(url)``: the check WeCom makes when the URL is saved: ``GET ?msg_signature&timestamp&nonce&echostr``
  with ``echostr`` an encrypted random string; the URL passes if it answers 200 with that string's plaintext.
* A message or event: ``POST ?msg_signature&timestamp&nonce`` with the envelope
  ``<xml><ToUserName/><Encrypt/><AgentID/></xml>``, the message XML encrypted inside (crypto.py). WeCom waits
  ``answer_timeout`` (5 s) for the answer, then drops the connection and sends the same request again, three
  times in all (``retries``). A refused connection or a status other than 200 is retried too, after
  ``retry_delays`` (WeCom does not document its spacing: that is the fake's choice). An empty 200 body means "no
  passive reply"; anything else is recorded as the passive reply it would be (``passive_replies``).
* Each delivery is a record in ``state["callbacks"]`` (its attempts: when, status or failure); ``acked`` once a 200
  came within the timeout, ``given_up`` after the last retry.

After a refused connection the fake asks ``url_source()`` (if set, in a thread) for the URL again: a gateway whose
adapter restarted may listen on a new port (tests bind port 0).
"""
from __future__ import annotations

import asyncio
import time
from typing import Callable, Optional
from urllib.parse import urlencode

import aiohttp

from tests.fakes.wecom import crypto


def cdata(text: str) -> str:
    return "<![CDATA[" + text.replace("]]>", "]]]]><![CDATA[>") + "]]>"


def message_xml(fields: dict) -> bytes:
    """A callback's XML: numbers bare, strings in CDATA, in the order given."""
    parts = [f"<{tag}>{value}</{tag}>" if isinstance(value, int) else f"<{tag}>{cdata(str(value))}</{tag}>"
             for tag, value in fields.items()]
    return ("<xml>" + "".join(parts) + "</xml>").encode()


class CallbackMethods:
    """Mixin for FakeWeCom: needs ``corp_id``, ``agent_id``, ``callback_token``, ``encoding_aes_key``,
    ``limits`` and the FakeServer state."""

    callback_url: Optional[str] = None
    url_source: Optional[Callable[[], Optional[str]]] = None

    # -- building requests
    def signed_query(self, msg_encrypt: str, *, token: Optional[str] = None, timestamp: Optional[str] = None,
                     echostr: bool = False) -> dict:
        stamp = timestamp or str(int(time.time()))
        once = crypto.nonce()
        signature = crypto.msg_signature(token or self.callback_token, stamp, once, msg_encrypt)
        query = {"msg_signature": signature, "timestamp": stamp, "nonce": once}
        if echostr:
            query["echostr"] = msg_encrypt
        return query

    def envelope(self, msg_encrypt: str) -> bytes:
        return message_xml({"ToUserName": self.corp_id, "Encrypt": msg_encrypt, "AgentID": str(self.agent_id)})

    def callback_request(self, xml: bytes) -> tuple[dict, bytes]:
        """(query, body) of the callback carrying ``xml``, signed and encrypted as WeCom does."""
        msg_encrypt = crypto.encrypt(self.encoding_aes_key, xml, self.corp_id)
        return self.signed_query(msg_encrypt), self.envelope(msg_encrypt)

    # -- delivering
    def deliver(self, kind: str, xml: bytes, msg_id: Optional[str], user: str,
                request: Optional[tuple[dict, bytes]] = None) -> str:
        """Queue one delivery (the signed request, or ``request`` as given) and start it; returns its id."""
        query, body = request if request is not None else self.callback_request(xml)
        with self.mutate() as state:
            callback_id = f"cb{state['next_callback']}"
            state["next_callback"] += 1
            state["callbacks"].append({"id": callback_id, "kind": kind, "msg_id": msg_id, "user": user,
                                       "query": query, "body": body.decode(), "xml": xml.decode(),
                                       "attempts": [], "state": "pending"})
        self._loop.call_soon_threadsafe(self._spawn, self._deliver(callback_id))
        return callback_id

    def redeliver(self, callback_id: str) -> str:
        """The same request again (as a retry WeCom decided on is): a new delivery record."""
        record = self.callback(callback_id)
        return self.deliver(record["kind"], record["xml"].encode(), record["msg_id"], record["user"],
                            request=(record["query"], record["body"].encode()))

    def callback(self, callback_id: str) -> dict:
        return self.read(lambda s: next(c for c in s["callbacks"] if c["id"] == callback_id))

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, callback_id: str) -> None:
        record = self.callback(callback_id)
        delays = list(self.limits["retry_delays"])
        for attempt in range(1 + int(self.limits["retries"])):
            url = self.callback_url
            status, answer, failure = None, "", None
            started = time.time()
            if url is None:
                failure = "no callback URL"
            else:
                try:
                    async with self._client().post(
                            url + "?" + urlencode(record["query"]), data=record["body"].encode(),
                            headers={"Content-Type": "text/xml"},
                            timeout=aiohttp.ClientTimeout(total=self.limits["answer_timeout"])) as resp:
                        status, answer = resp.status, await resp.text()
                except asyncio.TimeoutError:
                    failure = "timeout"
                except aiohttp.ClientError as exc:
                    failure = f"connection: {type(exc).__name__}"
            ok = status == 200
            with self.mutate() as state:
                live = next(c for c in state["callbacks"] if c["id"] == callback_id)
                live["attempts"].append({"at": started, "answered_at": time.time(), "status": status,
                                         "failure": failure})
                state["stats"]["callback_attempts"] += 1
                if attempt:
                    state["stats"]["callback_retries"] += 1
                if ok:
                    live["state"] = "acked"
                    if answer:
                        state["passive_replies"].append({"callback": callback_id, "body": answer[:2000]})
                    return
            if failure and failure.startswith("connection") and self.url_source is not None:
                fresh = await asyncio.to_thread(self.url_source)
                if fresh:
                    self.callback_url = fresh
            if failure != "timeout":   # a timeout already waited its 5 s
                await asyncio.sleep(delays[min(attempt, len(delays) - 1)] if delays else 0.0)
        with self.mutate() as state:
            next(c for c in state["callbacks"] if c["id"] == callback_id)["state"] = "given_up"

    async def verify_url_async(self, url: str) -> dict:
        plain = crypto.nonce() + crypto.nonce()
        echostr = crypto.encrypt(self.encoding_aes_key, plain.encode(), self.corp_id)
        query = self.signed_query(echostr, echostr=True)
        try:
            async with self._client().get(url + "?" + urlencode(query),
                                          timeout=aiohttp.ClientTimeout(total=self.limits["answer_timeout"])) as resp:
                status, answer = resp.status, await resp.text()
        except (asyncio.TimeoutError, aiohttp.ClientError) as exc:
            status, answer = None, type(exc).__name__
        verified = status == 200 and answer == plain
        with self.mutate() as state:
            state["stats"]["url_verifications"] += 1
            if verified:
                self.callback_url = url
        return {"verified": verified, "status": status, "answer": answer[:200]}

    def verify_url(self, url: str) -> dict:
        """The URL check; on success callbacks go to ``url``."""
        return asyncio.run_coroutine_threadsafe(self.verify_url_async(url), self._loop).result(30)

    async def post_raw(self, url: str, query: dict, body: bytes) -> tuple[Optional[int], str]:
        try:
            async with self._client().post(url + "?" + urlencode(query), data=body,
                                           timeout=aiohttp.ClientTimeout(total=30)) as resp:
                return resp.status, await resp.text()
        except (asyncio.TimeoutError, aiohttp.ClientError) as exc:
            return None, type(exc).__name__

    def post(self, query: dict, body: bytes, url: Optional[str] = None) -> tuple[Optional[int], str]:
        """One request as given (no retries), to forge what WeCom never sends: (status, answer)."""
        return asyncio.run_coroutine_threadsafe(self.post_raw(url or self.callback_url, query, body),
                                                self._loop).result(40)

    def _client(self) -> aiohttp.ClientSession:
        if self._http is None or self._http.closed:
            self._http = aiohttp.ClientSession()
        return self._http

    async def close_callbacks(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.close()
