"""The pure parts of the http adapter: signatures, request parsing, conversation ids, reply routing, stream deltas,
callback statuses."""
from __future__ import annotations

import pytest

from actors.adapters.outbound import classify_error
from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.http.openai_api import (BadRequest, UnknownModel, api_event, conversation_chat_id,
                                                 message_text, parse_chat_request, resolve_profile, token_owner)
from actors.adapters.http.replies import ReplyBook, StreamCursor, visible_preview
from actors.adapters.http.signing import MAX_SKEW_S, sign, signature_ok, signature_problem, signed_headers
from actors.adapters.http.webhook import callback_payload, error_for_status, webhook_event
from actors.messages import PlatformOp

pytestmark = pytest.mark.timeout(10)


def test_signatures_verify_only_the_exact_body_at_its_timestamp_under_the_secret():
    body, now = b'{"text": "hi"}', 1_767_225_600
    header = sign("s3cret", body, now)
    assert header.startswith("sha256=") and len(header) == len("sha256=") + 64
    assert signature_ok("s3cret", body, header, str(now), now)
    assert signature_ok("s3cret", body, header.upper().replace("SHA256=", "sha256="), str(now), now)  # hex case
    assert not signature_ok("s3cret", body + b" ", header, str(now), now)
    assert not signature_ok("other", body, header, str(now), now)
    assert not signature_ok("s3cret", body, None, str(now), now) and not signature_ok("s3cret", body, "", str(now))
    assert not signature_ok("s3cret", body, header[len("sha256="):], str(now), now)   # the scheme is part of it
    assert not signature_ok("", body, sign("", body, now), str(now), now), "no secret configured: nothing verifies"
    assert not signature_ok("s3cret", body, "sha256=\udcff", str(now), now)
    assert not signature_ok("s3cret", body, header, str(now + 1), now), "the timestamp is signed with the body"


def test_a_signature_is_good_for_five_minutes_either_way_and_says_why_not():
    body, sent = b"{}", 1_767_225_600
    header = sign("k", body, sent)
    assert signature_ok("k", body, header, str(sent), sent + MAX_SKEW_S)
    assert signature_ok("k", body, header, str(sent), sent - MAX_SKEW_S)   # a sender's clock a little ahead
    assert "from this server's clock" in signature_problem("k", body, header, str(sent), sent + MAX_SKEW_S + 1)
    for stamp in (None, "", "soon", "-5", "1.5", "\u0661\u0662", "9" * 40):
        assert "X-Signature-Timestamp" in signature_problem("k", body, header, stamp, sent), stamp
    headers = signed_headers("k", body, now=sent)
    assert headers == {"X-Signature-Timestamp": str(sent), "X-Signature-256": header}


def test_webhook_bodies_are_validated_field_by_field():
    event = webhook_event({"conversation_id": "c1", "user_id": 7, "message_id": "m1", "text": "hello"}, "api", "work")
    assert event.platform_message_id == "c1/m1" and event.text == "hello"
    assert (event.source.chat_id, event.source.user_id, event.source.user_name, event.source.profile) == (
        "c1", "7", "7", "work")
    for body, reason in [([], "JSON object"),
                         ({"user_id": "u", "message_id": "m", "text": "x"}, "conversation_id"),
                         ({"conversation_id": "c", "user_id": "", "message_id": "m", "text": "x"}, "user_id"),
                         ({"conversation_id": "c", "user_id": "u", "message_id": True, "text": "x"}, "message_id"),
                         ({"conversation_id": "c", "user_id": "u", "message_id": "m", "text": None}, "text"),
                         ({"conversation_id": "c" * 300, "user_id": "u", "message_id": "m", "text": "x"}, "at most"),
                         ({"conversation_id": "v1:abc", "user_id": "u", "message_id": "m", "text": "x"}, "reserved")]:
        with pytest.raises(MalformedPayload, match=reason):
            webhook_event(body, "api", "default")


def test_callback_statuses_map_to_what_the_gateway_does_next():
    def kind(status, retry_after=None):
        error = error_for_status(status, retry_after, f"HTTP {status}")
        return None if error is None else classify_error(error)
    assert kind(200) is None and kind(204) is None
    assert kind(429, 0.4) == ("flood", 0.4) and kind(429) == ("flood", 1.0)
    assert kind(404) == ("not_found", 0.0) and kind(410) == ("not_found", 0.0)
    assert kind(413) == ("too_long", 0.0)
    assert kind(400) == ("permanent", 0.0) and kind(403) == ("permanent", 0.0)
    assert kind(500) == ("retryable", 0.0) and kind(503, 2.0) == ("retryable", 2.0)


def test_callback_payload_names_the_message_it_answers():
    send = PlatformOp("o1", "send", "c1", "hi", reply_to="c1/m9", final=True)
    assert callback_payload(send, "m-1") == {"conversation_id": "c1", "message_id": "m-1", "action": "send",
                                             "text": "hi", "final": True, "in_reply_to": "m9"}
    delete = PlatformOp("o2", "delete", "c1", "ignored", message_id="m-1")
    assert callback_payload(delete, "m-1") == {"conversation_id": "c1", "message_id": "m-1", "action": "delete",
                                               "text": "", "final": False}


def test_chat_requests_take_the_last_user_message():
    chat = parse_chat_request({"model": "work", "stream": True, "user": "bob", "messages": [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "first"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [{"type": "text", "text": "second"}, {"type": "image_url", "image_url": {}}]}]})
    assert (chat.text, chat.model, chat.stream, chat.user) == ("second", "work", True, "bob")
    assert message_text([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]) == "a\nb"
    for body, reason in [([], "JSON object"), ({"messages": []}, "non-empty"),
                         ({"messages": [{"role": "system", "content": "x"}]}, "role 'user'"),
                         ({"messages": [{"role": "user", "content": "  "}]}, "no text"),
                         ({"messages": [{"role": "user", "content": 5}]}, "content"),
                         ({"messages": [{"role": "user", "content": "x"}], "stream": "yes"}, "stream"),
                         ({"messages": [{"role": "user", "content": "x"}], "user": 5}, "user")]:
        with pytest.raises(BadRequest, match=reason):
            parse_chat_request(body)


def test_conversations_are_scoped_to_the_token():
    owner = token_owner("tok-a")
    assert "tok-a" not in owner and len(owner) == 16
    assert conversation_chat_id("tok-a", "bob", "conv", "r1") == f"v1:{owner}:user:bob"
    assert conversation_chat_id("tok-a", None, "conv", "r1") == f"v1:{owner}:conversation:conv"
    assert conversation_chat_id("tok-a", None, None, "r1") == f"v1:{owner}:request:r1"
    assert conversation_chat_id("tok-b", "bob", None, "r1") != conversation_chat_id("tok-a", "bob", None, "r1")


def test_the_model_picks_a_served_profile_and_anything_else_is_refused():
    served, aliases = ["default", "support", "work"], {"gpt-4o-mini": "work", "legacy": "gone"}
    assert resolve_profile("", "default", served, aliases) == "default", "no model: the adapter's own profile"
    assert resolve_profile("profile:support", "default", served, aliases) == "support"
    assert resolve_profile("work", "default", served, aliases) == "work", "the ids /v1/models lists"
    assert resolve_profile("gpt-4o-mini", "default", served, aliases) == "work"
    for model, says in [("profile:secret", "names the profile `secret`"), ("gpt-4o", "`gpt-4o` does not exist"),
                        ("legacy", "maps to the profile `gone`"), ("profile:", "names the profile ``")]:
        with pytest.raises(UnknownModel, match=says) as refused:
            resolve_profile(model, "default", served, aliases)
        assert "default, support, work" in str(refused.value), "the message lists what may be asked for"
    catch_all = {"*": "support", "gpt-4o-mini": "work"}
    assert resolve_profile("gpt-4o", "default", served, catch_all) == "support", "configured, not silent"
    assert resolve_profile("work", "default", served, catch_all) == "work"
    with pytest.raises(UnknownModel):
        resolve_profile("profile:secret", "default", served, catch_all)


def test_a_profile_other_than_the_adapters_gets_chats_of_its_own():
    owner = token_owner("tok-a")
    assert conversation_chat_id("tok-a", "bob", None, "r1", "work") == f"v1:{owner}:profile:work:user:bob"
    assert conversation_chat_id("tok-a", "bob", None, "r1", None) == f"v1:{owner}:user:bob"
    raw = {"chat_id": "v1:x:user:bob", "user_id": "bob", "message_id": "r1", "text": "hi"}
    assert api_event(raw, "api", "default").source.profile == "default"
    assert api_event({**raw, "profile": "work"}, "api", "default", ["default", "work"]).source.profile == "work"
    with pytest.raises(MalformedPayload, match="does not serve"):
        api_event({**raw, "profile": "secret"}, "api", "default", ["default", "work"])


def test_previews_lose_the_cursor_and_the_tool_line():
    assert visible_preview("Hello wor ▍") == "Hello wor"
    assert visible_preview("The sum\n\n⚙ calculator… ▍") == "The sum"
    assert visible_preview("⚙ calculator… ▍") == ""
    assert visible_preview("Trailing space  ▍") == "Trailing space"


def test_the_waiting_for_the_model_line_is_never_streamed_as_the_answer():
    assert visible_preview("\n\n⏳ still waiting for the model… (5s) ▍") == ""
    cursor = StreamCursor()
    previews = ("\n\n⏳ still waiting for the model… (5s) ▍", "Here ▍", "Here it is ▍")
    assert [cursor.preview(t) for t in previews] == ["", "Here", " it is"], "the answer streams on after the wait"
    assert not cursor.diverged


def test_stream_deltas_only_append_and_the_final_text_completes_them():
    cursor = StreamCursor()
    assert [cursor.preview(t) for t in ("Hel ▍", "Hello wor ▍", "Hello wor ▍", "Hello world ▍")] == [
        "Hel", "lo wor", "", "ld"]
    assert cursor.final("Hello world!") == "!" and cursor.sent == "Hello world!"

    rewritten = StreamCursor()
    assert rewritten.preview("Answer: 4 ▍") == "Answer: 4"
    assert rewritten.preview("Answer: 5 ▍") == "" and rewritten.diverged
    assert rewritten.preview("Answer: 5, sure ▍") == "", "no previews after a rewrite"
    assert rewritten.final("Answer: 5, sure.") == "5, sure."   # continues from what the client has


def test_operations_reach_the_request_whose_message_they_answer():
    book = ReplyBook()
    first, second = book.open("c", "r1"), book.open("c", "r2")
    assert book.apply(PlatformOp("1", "send", "c", "one ▍", reply_to="r1"), "m1")
    assert book.apply(PlatformOp("2", "send", "c", "part two", final=True), "m2"), "a later part: same reply"
    assert book.apply(PlatformOp("3", "edit", "c", "one", message_id="m1", final=True), "m1")
    assert first.text() == "onepart two" and first.saw_final and not second.parts
    assert book.apply(PlatformOp("4", "send", "c", "two", reply_to="r2", final=True), "m3")
    assert second.text() == "two"
    assert not book.apply(PlatformOp("5", "send", "c", "to nobody", reply_to="r0"), "m4")
    assert not book.apply(PlatformOp("6", "send", "c", "its part two"), "m5"), "the stranger's parts are not ours"
    assert book.apply(PlatformOp("7", "delete", "c", message_id="m2"), "m2") and first.text() == "one"
    book.close(first)
    book.close(second)
    assert not book.apply(PlatformOp("8", "edit", "c", "late", message_id="m1"), "m1")
    assert book.waiting() == []
