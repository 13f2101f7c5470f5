"""The web chat in the real daemon, over HTTP and WebSockets: the page, the guards, frames, history, port 0."""
from __future__ import annotations

import asyncio
import json
import uuid

import socket

import aiohttp
import psutil
import pytest

from actors.adapters.webchat.protocol import MAX_FRAME_BYTES, visitor_id
from tests.actor_system import free_port, wait_for
from tests.webchat.client import WebChatClient, issued_cookie
from tests.webchat.helpers import served_port, wait_log, webchat_gateway

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One gateway for the module, its web chat on port 0: the OS picks the port, the log says which. A route sends
    the web chat to a profile of its own, so a visitor's history and files are found under that profile's key (the
    key its messages are stored under), not under the adapter's default one."""
    routed = '[profiles.concierge]\nsystem_prompt = "You are the concierge."\n\n[[routes]]\nadapter = "web"\n' \
             'profile = "concierge"\n'
    gw = webchat_gateway(tmp_path_factory.mktemp("webchat-server"), port=0,
                         extra="[agent]\nchunk_delay_s = 0.0\n\n" + routed)
    try:
        gw.start()
        gw.wait_ready()
        port = served_port(gw)
        client = WebChatClient(f"http://127.0.0.1:{port}")
        yield gw, port, client
        client.close()
    finally:
        gw.cli("stop")
        gw.kill_everything()


def visitor_name() -> str:
    return f"visitor-{uuid.uuid4().hex[:10]}"


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


async def fetch(url: str, **headers) -> tuple[int, dict, str]:
    async with aiohttp.ClientSession() as session:
        async with session.get(url, headers=headers) as response:
            return response.status, dict(response.headers), await response.text()


def test_port_zero_is_logged_and_only_the_configured_host_listens(served):
    gw, port, _ = served
    assert port > 0
    [line] = wait_log(gw, "web chat serving on")
    assert "INFO" in line and f"http://127.0.0.1:{port}/" in line
    gw.tree()
    listening = [c for c in psutil.net_connections(kind="inet")
                 if c.status == psutil.CONN_LISTEN and c.pid in gw.seen_pids]
    assert port in {c.laddr.port for c in listening}
    assert all(c.laddr.ip == "127.0.0.1" for c in listening), listening


def test_the_page_and_its_assets_are_served_with_a_strict_policy(served):
    _, port, _ = served
    status, headers, body = run(fetch(f"http://127.0.0.1:{port}/"))
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert '<label for="input">' in body and "/static/app.js" in body
    assert "script-src 'self'" in headers["Content-Security-Policy"] and headers["X-Frame-Options"] == "DENY"
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        status, headers, _ = run(fetch(f"http://127.0.0.1:{port}/static/{name}"))
        assert status == 200 and headers["Content-Type"].startswith(kind)
    for path in ("/static/index.html", "/static/..%2f..%2fadapter.py", "/static/nope.js", "/admin"):
        assert run(fetch(f"http://127.0.0.1:{port}{path}"))[0] == 404, path


def test_a_foreign_host_name_or_origin_is_refused(served):
    gw, port, _ = served
    status, _, _ = run(fetch(f"http://127.0.0.1:{port}/", Host=f"rebound.example:{port}"))
    assert status == 421
    wait_log(gw, "refused a request for host 'rebound.example")

    async def foreign_socket():
        async with aiohttp.ClientSession() as session:
            with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
                cookie = await issued_cookie(session, f"http://127.0.0.1:{port}")
                await session.ws_connect(f"http://127.0.0.1:{port}/ws",
                                         headers={"Origin": "http://evil.example", **cookie})
            return refused.value.status
    assert run(foreign_socket()) == 403
    wait_log(gw, "refused a WebSocket from origin 'http://evil.example'")


def test_malformed_frames_get_an_error_frame_a_log_line_and_the_connection_stays(served):
    gw, port, _ = served
    visitor = []   # the id the gateway gave this visitor (hello frame)
    bad_frames = ["{not json", "[]", json.dumps({"type": "shout"}), b"\x00\x01",
                  json.dumps({"type": "history", "pad": "x" * (MAX_FRAME_BYTES + 1)}),
                  json.dumps({"type": "message", "id": "m2", "text": ""}),
                  json.dumps({"type": "message", "id": "bad id!", "text": "hi"}),
                  json.dumps({"type": "message", "id": "m3", "text": "x" * 16_001})]

    async def session():
        async with aiohttp.ClientSession() as http:
            cookie = await issued_cookie(http, f"http://127.0.0.1:{port}")
            async with http.ws_connect(f"http://127.0.0.1:{port}/ws", headers=cookie) as ws:
                visitor.append((await ws.receive_json())["visitor"])
                errors = []
                for frame in bad_frames:
                    await (ws.send_bytes(frame) if isinstance(frame, bytes) else ws.send_str(frame))
                    errors.append(await ws.receive_json())
                await ws.send_json({"type": "message", "id": "good-1", "text": "still talking to me?"})
                ack = await ws.receive_json()
                while ack["type"] == "op":   # the answer may start before the test reads its ack
                    ack = await ws.receive_json()
                return errors, ack
    errors, ack = run(session())
    assert [e["type"] for e in errors] == ["error"] * len(bad_frames)
    assert not any(e["retry"] for e in errors)
    reasons = [e["error"] for e in errors]
    for expected in ("not JSON", "must be a JSON object", "unknown frame type 'shout'", "binary frames",
                     "frame over", "text is empty", "message id must be", "I take at most 16,000 characters"):
        assert any(expected in r for r in reasons), (expected, reasons)
    assert ack == {"type": "ack", "id": "good-1", "duplicate": False}
    lines = wait_log(gw, f"malformed payload rejected (visitor {visitor[0]}", len(bad_frames))
    assert len(lines) == len(bad_frames) and all("WARNING" in line for line in lines)


def test_an_over_long_message_of_any_size_is_answered_with_its_id_and_the_limit_and_never_becomes_a_turn(served):
    """[gateway] max_text_chars (16,000 by default) for the web chat: the message is refused with an error frame that
    names it and says its length and the limit, in the words every adapter uses, whether its frame is small (16,001
    characters) or over the frame size (200,000 ASCII characters, 50,000 three-byte ones); nothing of it is stored,
    so the history holds only the message sent after them and its answer."""
    _, port, _ = served
    too_long = {"long-ascii": "x" * 16_001, "long-big": "word " * 40_000, "long-wide": "語" * 50_000}

    async def session():
        async with aiohttp.ClientSession() as http:
            cookie = await issued_cookie(http, f"http://127.0.0.1:{port}")
            async with http.ws_connect(f"http://127.0.0.1:{port}/ws", headers=cookie) as ws:
                hello = await ws.receive_json()
                refusals = {}
                for message_id, text in too_long.items():
                    await ws.send_str(json.dumps({"type": "message", "id": message_id, "text": text},
                                                 ensure_ascii=False))
                    refusal = await ws.receive_json()
                    refusals[message_id] = refusal
                await ws.send_json({"type": "message", "id": "short-1", "text": "a short one"})
                final = None
                while final is None:
                    frame = await ws.receive_json()
                    if frame["type"] == "op" and frame.get("final") and frame["action"] in ("send", "edit"):
                        final = frame
                await ws.send_json({"type": "history"})
                history = await ws.receive_json()
                while history["type"] != "history":
                    history = await ws.receive_json()
                return hello, refusals, history
    hello, refusals, history = run(session())
    for message_id, text in too_long.items():
        refusal = refusals[message_id]
        assert refusal["type"] == "error" and refusal["id"] == message_id and refusal["retry"] is False, refusal
        assert f"Your message is {len(text):,} characters long; I take at most 16,000 characters" in \
            refusal["error"], refusal
    shown = [(m["role"], m["text"][:40]) for m in history["messages"]]
    assert [role for role, _ in shown] == ["user", "assistant"] and shown[0][1] == "a short one", shown
    assert not any(m.get("queued") for m in history["messages"]), "nothing of the long ones waits in the inbox"
    assert hello["max_text_chars"] == 16_000, "the page is told the limit, to refuse before it sends"
    assert (hello["profile"], hello["agent"], hello["model"]) == ("concierge", "offline", ""), \
        f"the welcome line names the routed profile's agent: {hello}"


def test_on_the_defaults_debug_frames_are_refused_and_the_agents_test_hooks_are_words(tmp_path):
    """Without [debug] fault_injection (an operator's gateway) nobody in the chat can arm a fault, hold a send
    before its record (debug.hold_send: the answer would wait a minute) or hold a turn with the offline agent's
    #slow hook."""
    gw = webchat_gateway(tmp_path, port=0, extra="[agent]\nchunk_delay_s = 0.0\n", test_hooks=False)
    try:
        gw.start()
        gw.wait_ready()
        port = served_port(gw)

        async def session():
            async with aiohttp.ClientSession() as http:
                cookie = await issued_cookie(http, f"http://127.0.0.1:{port}")
                async with http.ws_connect(f"http://127.0.0.1:{port}/ws", headers=cookie) as ws:
                    assert (await ws.receive_json())["type"] == "hello"
                    await ws.send_json({"type": "debug.floods", "count": 1, "retry_after": 1})
                    refusal = await ws.receive_json()
                    await ws.send_json({"type": "debug.hold_send"})
                    hold_refusal = await ws.receive_json()
                    await ws.send_json({"type": "message", "id": "hook-1", "text": "wait for me #slow 3600"})
                    frames = []
                    while not (frames and frames[-1].get("type") == "op" and frames[-1].get("final")):
                        frames.append(await asyncio.wait_for(ws.receive_json(), 30))
                    return refusal, hold_refusal, frames
        refusal, hold_refusal, frames = run(session())
        for refused in (refusal, hold_refusal):
            assert refused["type"] == "error" and "debug frames need [debug] fault_injection" in refused["error"]
        assert 'You said: "wait for me #slow 3600"' in frames[-1]["text"], "answered at once, in full"
    finally:
        gw.cli("stop")
        gw.kill_everything()


def test_the_server_issues_the_visitor_and_a_client_cannot_choose_or_forge_one(served):
    gw, port, _ = served
    base = f"http://127.0.0.1:{port}"

    async def attempts():
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/") as page:
                cookie = page.cookies["gw_visitor"]
                again = page.headers.getall("Set-Cookie")[0]
            async with session.get(f"{base}/", headers={"Cookie": f"gw_visitor={cookie.value}"}) as page:
                kept = "Set-Cookie" not in page.headers      # a valid cookie is kept, not replaced
            statuses = {}
            for name, url, headers in (("chosen", f"{base}/ws?visitor=aaaaaaaa", {}),
                                       ("chosen with a cookie", f"{base}/ws?visitor=aaaaaaaa",
                                        {"Cookie": f"gw_visitor={cookie.value}"}),
                                       ("no cookie", f"{base}/ws", {}),
                                       ("forged", f"{base}/ws", {"Cookie": "gw_visitor=aaaaaaaa"})):
                try:
                    async with session.ws_connect(url, headers=headers):
                        statuses[name] = 101
                except aiohttp.WSServerHandshakeError as refused:
                    statuses[name] = refused.status
            async with session.ws_connect(f"{base}/ws", headers={"Cookie": f"gw_visitor={cookie.value}"}) as ws:
                hello = await ws.receive_json()
            return cookie, again, kept, statuses, hello
    cookie, header, kept, statuses, hello = run(attempts())
    assert len(cookie.value) == 43, "256 random bits"
    assert "HttpOnly" in header and "SameSite=Strict" in header and "Path=/" in header, header
    assert kept
    assert statuses == {"chosen": 400, "chosen with a cookie": 400, "no cookie": 401, "forged": 401}, statuses
    assert hello["type"] == "hello" and hello["visitor"] == visitor_id(cookie.value) != cookie.value
    wait_log(gw, "a WebSocket that named its own visitor (?visitor=) refused")
    assert cookie.value not in gw.log(), "the credential itself never reaches the log"


def test_history_is_the_visitors_conversation_and_a_resend_is_deduplicated(served):
    _, _, client = served
    visitor, other = visitor_name(), visitor_name()
    client.say(visitor, "first", "hello from the first visitor")
    client.say(other, "first", "hello from someone else")

    def settled(name, count):
        frame = client.request(name, {"type": "history"})
        answers = [m for m in frame["messages"] if m["role"] == "assistant"]
        return len(answers) >= count and not frame["live"] and frame
    history = wait_for(lambda: settled(visitor, 1), 30, 0.2, "the first answer in the history")
    assert [m["role"] for m in history["messages"]] == ["user", "assistant"]
    assert history["messages"][0] == {**history["messages"][0], "text": "hello from the first visitor", "id": "first"}
    assert 'You said: "hello from the first visitor"' in history["messages"][1]["text"]
    assert "someone else" not in json.dumps(history)

    client.say(visitor, "first", "hello from the first visitor")   # a resend after a lost ack: same id
    wait_for(lambda: client.visitor(visitor).acks["first"] >= 2, 10, 0.05, "the resend's ack")
    assert [f for f in client.visitor(visitor).frames if f.get("type") == "ack"][-1]["duplicate"] is True
    client.say(visitor, "second", "and a second message")
    history = wait_for(lambda: settled(visitor, 2), 30, 0.2, "the second answer")
    assert [m["role"] for m in history["messages"]] == ["user", "assistant", "user", "assistant"]
    assert "2 messages from you" in history["messages"][3]["text"]


def test_operations_are_pushed_to_every_open_tab_of_the_visitor(served):
    _, port, _ = served
    visitor = visitor_name()
    tabs = [WebChatClient(f"http://127.0.0.1:{port}") for _ in range(2)]
    try:
        for tab in tabs:
            tab.request(visitor, {"type": "ping"})
        tabs[0].say(visitor, "m1", "two tabs #slow 0.03")

        def final_text(tab):
            ops = [f for f in tab.visitor(visitor).frames if f.get("type") == "op"]
            return next((op["text"] for op in ops if op["final"]), None)
        texts = [wait_for(lambda t=tab: final_text(t), 30, 0.05, "the final answer in each tab") for tab in tabs]
        assert texts[0] == texts[1] and 'You said: "two tabs #slow 0.03"' in texts[0]
        previews = [f for f in tabs[1].visitor(visitor).frames if f.get("type") == "op" and f["action"] != "typing"
                    and not f["final"]]
        assert previews, "the answer streamed into the second tab too"
    finally:
        for tab in tabs:
            tab.close()


def test_a_reload_mid_answer_gets_the_streaming_message_and_its_next_edits(served):
    _, _, client = served
    visitor = visitor_name()
    client.say(visitor, "slow", "take your time #slow 0.1")

    def streaming():
        ops = [f for f in client.visitor(visitor).frames if f.get("type") == "op" and f["action"] == "send"]
        return ops and not ops[0]["final"] and ops[0]["message_id"]
    message_id = wait_for(streaming, 30, 0.02, "the answer to start streaming")
    reloaded = WebChatClient(client.base_url)   # a second page load while the answer streams
    try:
        history = reloaded.request(visitor, {"type": "history"})
        assert [m["role"] for m in history["messages"]] == ["user"]
        [live] = history["live"]
        assert live["message_id"] == message_id and not live["final"] and live["text"].startswith("You said")
        assert live["reply_to"] == "slow", "the answer says which message of the page it answers"
        assert live["html"].startswith("<p>You said") and 'class="cursor"' in live["html"]

        def final_op():
            return next((f for f in reloaded.visitor(visitor).frames
                         if f.get("type") == "op" and f["final"] and f["message_id"] == message_id), None)
        final = wait_for(final_op, 30, 0.05, "the final edit in the reloaded page")
        assert final["reply_to"] == "slow" and 'class="cursor"' not in final["html"]
        history = reloaded.request(visitor, {"type": "history"})
        assert history["live"] == [] and history["messages"][-1]["text"] == final["text"]
        assert history["messages"][-1]["html"] == final["html"], "the history shows the answer as it was streamed"
    finally:
        reloaded.close()


def test_a_busy_port_is_retried_until_it_is_free_and_the_gateway_stays_up(tmp_path):
    port = free_port()
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", port))
    squatter.listen()
    gw = webchat_gateway(tmp_path, port=port)
    try:
        gw.start()
        gw.wait_ready()
        [line] = wait_log(gw, "web: intake error", timeout=20)[:1]
        assert "WARNING" in line and "reconnecting in" in line
        squatter.close()
        assert served_port(gw, timeout=40) == port
        assert gw.node("web")["restarts"] == 0, "a busy port is waited out, not a crash loop"
    finally:
        squatter.close()
        gw.cli("stop")
        gw.kill_everything()


def test_with_a_login_token_the_page_and_the_socket_need_the_login_link_once(tmp_path):
    token = "let-me-in-0123456789abcdef"
    gw = webchat_gateway(tmp_path, port=0, extra=f'login_token = "{token}"\n')
    try:
        gw.start()
        gw.wait_ready()
        base = f"http://127.0.0.1:{served_port(gw)}"

        async def visit():
            async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
                seen = {}
                async with http.get(f"{base}/") as page:
                    seen["page without login"] = page.status
                async with http.get(f"{base}/static/app.js") as script:
                    seen["script"] = script.status
                async with http.get(f"{base}/?token=wrong") as page:
                    seen["wrong token"] = page.status
                try:
                    async with http.ws_connect(f"{base}/ws"):
                        seen["socket without login"] = 101
                except aiohttp.WSServerHandshakeError as refused:
                    seen["socket without login"] = refused.status
                async with http.get(f"{base}/?token={token}", allow_redirects=False) as login:
                    seen["login"] = login.status
                    seen["to"] = login.headers.get("Location")
                    seen["cookie"] = login.headers.get("Set-Cookie", "")
                async with http.get(f"{base}/") as page:   # the jar holds the login cookie, and now a visitor's
                    seen["page after login"] = page.status
                async with http.ws_connect(f"{base}/ws") as ws:
                    seen["hello"] = (await ws.receive_json())["type"]
                return seen
        seen = run(visit())
        assert seen["page without login"] == 401 and seen["wrong token"] == 401 and seen["script"] == 200, seen
        assert seen["socket without login"] == 401, seen
        assert seen["login"] == 303 and seen["to"] == "/" and "HttpOnly" in seen["cookie"], seen
        assert token not in seen["cookie"], "the cookie holds a proof of the token, not the token"
        assert seen["page after login"] == 200 and seen["hello"] == "hello", seen
        wait_log(gw, "a wrong login token from")
        assert token not in gw.log()
    finally:
        gw.cli("stop")
        gw.kill_everything()


def test_a_file_the_reply_carries_is_pushed_and_served_only_to_its_own_visitor_and_never_as_html(served):
    _, port, client = served
    base = f"http://127.0.0.1:{port}"
    visitor, other = visitor_name(), visitor_name()
    client.say(visitor, "card", "draw a card saying back at nine")

    def file_op():
        return next((f for f in client.visitor(visitor).frames if f.get("type") == "op" and f.get("file")), None)
    op = wait_for(file_op, 30, 0.05, "the op that sends the drawn card")
    assert op["file"]["kind"] == "photo" and op["file"]["name"] == "card.png" and op["text"] == "drawn offline"
    url = f"{base}/{op['file']['url']}"

    async def get(name):
        async with aiohttp.ClientSession() as session:
            headers = await issued_cookie(session, base, name) if name else {}
            async with session.get(url, headers=headers) as response:
                return response.status, dict(response.headers), await response.read()
    status, headers, body = run(get(visitor))
    assert status == 200 and body.startswith(b"\x89PNG") and headers["Content-Type"] == "image/png"
    assert headers["X-Content-Type-Options"] == "nosniff" and "sandbox" in headers["Content-Security-Policy"]
    assert headers["Content-Disposition"].startswith("inline;")
    assert run(get(other))[0] == 404 and run(get(None))[0] == 404    # another chat's file, or no visitor: none
    status, _, _ = run(fetch(f"{base}/media/..%2F..%2Fgateway.db"))
    assert status == 404

    def with_file():
        frame = client.request(visitor, {"type": "history"})
        return next((m for m in frame["messages"] if m.get("file")), None)
    shown = wait_for(with_file, 30, 0.2, "the card in the history")
    assert shown["file"]["url"] == op["file"]["url"] and shown["role"] == "assistant"


def test_an_uploaded_photo_reaches_the_agent_with_the_message_and_uploads_are_bounded(served):
    from tests.actors.media.fixtures import png
    _, port, client = served
    base = f"http://127.0.0.1:{port}"
    visitor = visitor_name()

    async def upload(name, data, headers=None, field="file"):
        async with aiohttp.ClientSession() as session:
            cookie = await issued_cookie(session, base, name) if name else {}
            form = aiohttp.FormData()
            form.add_field(field, data, filename="../../photo.png", content_type="text/html")
            async with session.post(f"{base}/upload", data=form, headers={**cookie, **(headers or {})}) as response:
                is_json = response.content_type == "application/json"
                return response.status, await response.json() if is_json else await response.text()
    status, answer = run(upload(visitor, png(320, 240)))
    assert status == 200 and answer["kind"] == "photo" and answer["mime"] == "image/png"
    assert answer["name"].endswith("photo.png") and "/" not in answer["name"]   # a path is only a display name
    client.say(visitor, "with-photo", "what is this?", files=[answer["file"]])

    def answer_text():
        frame = client.request(visitor, {"type": "history"})
        done = [m for m in frame["messages"] if m["role"] == "assistant"]
        return not frame["live"] and done and (frame, done[-1]["text"])
    frame, text = wait_for(answer_text, 30, 0.2, "the answer about the photo")
    assert "You sent a photo (PNG, 320×240" in text and 'With it you said: "what is this?"' in text
    (mine,) = [m for m in frame["messages"] if m["role"] == "user"]
    assert mine["files"][0]["url"] == f"media/{answer['file']}" and mine["files"][0]["kind"] == "photo"

    assert run(upload(None, png()))[0] == 401                                          # no visitor
    assert run(upload(visitor, png(), {"Origin": "http://evil.example"}))[0] == 403    # another site's form
    assert run(upload(visitor, b""))[0] == 400
    assert run(upload(visitor, png(), field="other"))[0] == 400
    client.say(visitor, "bad-file", "x", files=["0" * 64])
    refused = wait_for(lambda: client.visitor(visitor).errors.get("bad-file"), 15, 0.05, "the refusal of bad-file")
    assert "no longer here" in str(refused)
    statuses = [run(upload(visitor, png(8 + n, 8)))[0] for n in range(20)]
    assert statuses[-1] == 429 and statuses.count(200) == 19    # 20 in ten minutes, the first one included


def test_a_visitor_lists_and_opens_only_its_own_conversations_and_a_forged_id_opens_nothing(served):
    """After New chat the earlier conversation is listed and can be opened to read (actors/adapters/webchat/
    earlier.py); a session id of another visitor, a made-up one or a malformed one is answered alike, with nothing
    of any conversation in the answer."""
    gw, _, client = served
    owner, other = visitor_name(), visitor_name()

    def answered(name, count, text):
        def check():
            frame = client.request(name, {"type": "history"})
            answers = [m for m in frame["messages"] if m["role"] == "assistant"]
            return len(answers) >= count and not frame["live"] and text in json.dumps(frame)
        wait_for(check, 30, 0.2, f"{count} answer(s) of {name}")
    client.say(owner, "a1", "the owner's secret plan")
    answered(owner, 1, "secret plan")
    client.say(owner, "a2", "/new")
    wait_for(lambda: any(f.get("type") == "op" and "Started a new conversation" in f.get("text", "")
                         for f in client.visitor(owner).frames), 30, 0.1, "the answer to /new")
    client.say(owner, "a3", "the owner's second chat")
    answered(owner, 1, "second chat")
    client.say(other, "b1", "someone else entirely")
    answered(other, 1, "someone else")

    owners = client.request(owner, {"type": "conversations"})
    assert owners["type"] == "conversations" and len(owners["items"]) == 2, owners
    current, earlier_one = owners["items"]
    assert current["current"] is True and "second chat" in current["preview"], current
    assert earlier_one["current"] is False and earlier_one["preview"] == "the owner's secret plan", earlier_one
    opened = client.request(owner, {"type": "conversation", "id": earlier_one["id"]})
    assert opened["type"] == "conversation" and opened["current"] is False, opened
    assert [m["text"] for m in opened["messages"] if m["role"] == "user"] == ["the owner's secret plan"], opened

    others = client.request(other, {"type": "conversations"})
    assert len(others["items"]) == 1 and "someone else" in others["items"][0]["preview"], others
    assert {i["id"] for i in others["items"]}.isdisjoint(i["id"] for i in owners["items"])
    forged = [earlier_one["id"], current["id"], uuid.uuid4().hex, "../" + earlier_one["id"], earlier_one["id"].upper(),
              5, None, ["x"], "x" * 5000]
    for session_id in forged:
        refusal = client.request(other, {"type": "conversation", "id": session_id})
        assert refusal == {"type": "conversation", "error": "no such conversation in this chat", "retry": False}, \
            (session_id, refusal)
    assert "secret plan" not in json.dumps(client.visitor(other).frames), "nothing of the owner's ever reached them"
    wait_log(gw, "asked for a conversation not its own", len(forged))


def test_a_file_of_an_earlier_conversation_is_still_served_to_its_own_visitor_and_to_no_other(served):
    """An earlier conversation opened to read shows its files: after New chat the card drawn before it is served to
    the visitor whose conversation names it, and still to nobody else."""
    _, port, client = served
    base = f"http://127.0.0.1:{port}"
    visitor, other = visitor_name(), visitor_name()
    client.say(visitor, "card", "draw a card saying see you at ten")
    op = wait_for(lambda: next((f for f in client.visitor(visitor).frames if f.get("type") == "op" and f.get("file")),
                               None), 30, 0.05, "the op that sends the drawn card")
    client.say(visitor, "new", "/new")
    wait_for(lambda: any(f.get("type") == "op" and "Started a new conversation" in f.get("text", "")
                         for f in client.visitor(visitor).frames), 30, 0.1, "the answer to /new")
    client.say(other, "hi", "hello")

    async def status_for(name):
        async with aiohttp.ClientSession() as session:
            async with session.get(f"{base}/{op['file']['url']}",
                                   headers=await issued_cookie(session, base, name)) as response:
                return response.status
    assert run(status_for(visitor)) == 200
    assert run(status_for(other)) == 404
    earlier_one = next(i for i in client.request(visitor, {"type": "conversations"})["items"] if not i["current"])
    opened = client.request(visitor, {"type": "conversation", "id": earlier_one["id"]})
    assert [m["file"]["url"] for m in opened["messages"] if m.get("file")] == [op["file"]["url"]], opened
