"""Hypothesis strategies and settings shared by the fuzz tests of every adapter's inbound path.

Two modes, one switch: ``GATEWAY_FUZZ_EXAMPLES`` unset (CI) runs a modest, derandomised number of examples per
property, so the run is the same every time; ``GATEWAY_FUZZ_EXAMPLES=N`` runs N examples per property with a
random seed (the long mode, N >= 10,000 for a release) and scales the daemon-level batches with it.

What the strategies produce: arbitrary JSON-like values (what a hostile or broken peer can put on the wire),
strings made to hurt (NUL, lone surrogates, which JSON's ``\\ud800`` escape can carry, RTL marks, combining marks,
huge strings), ids that are negative, huge, fractional, boolean or not scalars at all, and valid-looking payloads
taken apart: a field dropped, retyped, wrapped in a list, an unknown field added.
"""
from __future__ import annotations

import collections
import copy
import math
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from actors.adapters.payload_fields import MalformedPayload
from actors.adapters.intake import NotAddressed
from actors.messages import MessageEvent
from storage import InboundItem
from storage.keys import CHAT_TYPES

LONG_EXAMPLES = int(os.environ.get("GATEWAY_FUZZ_EXAMPLES") or 0)
CI_EXAMPLES = 60
EXAMPLES = LONG_EXAMPLES or CI_EXAMPLES

settings.register_profile("gateway-fuzz-ci", max_examples=CI_EXAMPLES, deadline=None, derandomize=True,
                          database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                 HealthCheck.large_base_example, HealthCheck.filter_too_much])
settings.register_profile("gateway-fuzz-long", max_examples=max(LONG_EXAMPLES, 1), deadline=None, database=None,
                          print_blob=True, suppress_health_check=list(HealthCheck))
# Used as a decorator, never loaded globally: the rest of the suite keeps its own hypothesis settings.
FUZZ = settings.get_profile("gateway-fuzz-long" if LONG_EXAMPLES else "gateway-fuzz-ci")


def daemon_batch(ci_count: int) -> int:
    """How many malformed payloads a daemon-level test sends per adapter: proportional in the long mode."""
    return max(ci_count, LONG_EXAMPLES // 20) if LONG_EXAMPLES else ci_count


# ----------------------------------------------------------------------------------------------- outcome tally
# Per adapter: how many cases ran and how many were rejected; conftest.py prints the table at the end of a run.
TALLY: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


def tally(adapter: str, outcome: str) -> None:
    TALLY[adapter]["cases"] += 1
    TALLY[adapter][outcome] += 1


# --------------------------------------------------------------------------------------------------- strings
NASTY_CHARS = ["\x00", "\ud800", "\udfff", "\udbff\udc00", "\u202e", "\u200f", "\u2066", "\ufeff", "\u200b",
               "e\u0301", "\U0001f600", "\U0001f468\u200d\U0001f469", "\u2028", "\r\n", "\t", " ", "\\", '"', "'",
               "%s", "{0}", "<b>", "&amp;", "${x}", "../", ":", "/", "@", "\x7f", "\x1b[31m", "\uffff", "\U0010ffff"]

nasty_text = st.lists(st.one_of(st.sampled_from(NASTY_CHARS), st.text(max_size=4)), max_size=8).map("".join)
huge_text = st.builds(lambda unit, n: unit * n, st.sampled_from(["x", "é", "\U0001f600", "\ud800", "a\x00", " "]),
                      st.sampled_from([1023, 1024, 4096, 4097, 16_000, 16_001, 65_537, 200_000]))
any_text = st.one_of(st.text(max_size=30), nasty_text, huge_text)
# Integers as JSON can carry them (Python's json refuses more than 4300 digits).
any_int = st.one_of(st.integers(-2**70, 2**70), st.sampled_from([0, -1, 2**31, -2**31, 2**53 + 1, 2**63, -2**63 - 1,
                                                                2**64, 10**300, -10**300]))
any_float = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.5, -0.0, 1e308, 3.0]))
scalar = st.one_of(st.none(), st.booleans(), any_int, any_float, any_text)
json_value = st.recursive(scalar, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                          st.dictionaries(any_text, inner, max_size=4)),
                          max_leaves=10)
# Where a payload wants an id: every wrong shape of one, plus the plausible ones.
any_id = st.one_of(any_int, any_text, st.sampled_from(["", "0", "-1", " ", "1.5", "1e3"]), any_float, st.booleans(),
                   st.none(), st.lists(any_int, max_size=2), st.dictionaries(st.text(max_size=3), any_int, max_size=2))


# ------------------------------------------------------------------------------------------- taking apart
def _paths(value, here=()):
    yield here
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, here + (key,))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _paths(child, here + (index,))


def _replace(root, path, new):
    if not path:
        return new
    parent = root
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = new
    return root


def _drop(root, path):
    if not path:
        return None
    parent = root
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    return root


def _at(root, path):
    for step in path:
        root = root[step]
    return root


@st.composite
def broken(draw, valid):
    """A valid payload with one to three things wrong with it, anywhere in its nesting."""
    payload = copy.deepcopy(draw(valid))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(_paths(payload))))
        how = draw(st.sampled_from(["drop", "retype", "wrap", "stringify", "extra", "nest"]))
        current = _at(payload, path)
        if how == "drop":
            payload = _drop(payload, path)
        elif how == "retype":
            payload = _replace(payload, path, draw(json_value))
        elif how == "wrap":
            payload = _replace(payload, path, [current])
        elif how == "stringify":
            payload = _replace(payload, path, str(current))
        elif how == "extra" and isinstance(current, dict):
            current[draw(any_text)] = draw(json_value)
        elif how == "nest":
            payload = _replace(payload, path, {draw(st.text(max_size=8)): current})
        if not isinstance(payload, (dict, list)):
            break
    return payload


def payloads(valid, plausible=None):
    """What the property tests feed a normaliser: noise, well-formed payloads (``plausible``: ordinary values, so
    the accepting side is exercised too), valid-looking ones with wild field values, and broken ones."""
    shapes = [json_value, valid, broken(valid), broken(valid)]
    if plausible is not None:
        shapes += [plausible, plausible, broken(plausible)]
    return st.one_of(*shapes)


plain_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40)


# ------------------------------------------------------------------------------------------------ the property
def check_event(event: MessageEvent, text_limit: int | None = None) -> None:
    """A MessageEvent an adapter let through: every field of the type the rest of the gateway assumes."""
    assert isinstance(event, MessageEvent), type(event)
    source = event.source
    for field in ("platform", "chat_id", "profile"):
        value = getattr(source, field)
        assert isinstance(value, str) and value, (field, value)
    assert source.chat_type in CHAT_TYPES, source.chat_type
    for field in ("thread_id", "user_id", "user_name"):
        value = getattr(source, field)
        assert value is None or isinstance(value, str), (field, value)
    assert isinstance(event.text, str)
    assert isinstance(event.platform_message_id, str) and event.platform_message_id
    assert event.reply_to_message_id is None or isinstance(event.reply_to_message_id, str)
    assert isinstance(event.received_at, float) and math.isfinite(event.received_at)
    assert isinstance(event.attachments, tuple) and event.internal is False
    if text_limit is not None:
        assert len(event.text) <= text_limit


def check_item(item: InboundItem) -> None:
    """What the base stores: a valid key, and a payload that round-trips as a MessageEvent."""
    assert isinstance(item, InboundItem)
    assert isinstance(item.session_key, str) and item.session_key
    item.platform_message_id.encode("utf-8")   # storable: no lone surrogate reaches SQLite
    check_event(MessageEvent.from_payload(item.payload))


def check_rejection(exc: Exception) -> str:
    """A rejection must say why in words: a MalformedPayload (or the adapter's own refusal type) with a reason."""
    reason = str(exc)
    assert reason.strip(), f"{type(exc).__name__} without a reason"
    assert "Traceback" not in reason
    return reason


def run_inbound(adapter, raw, tag: str, text_limit: int | None = None):
    """The base's own path for one raw payload (normalise, key, storability); returns the item or None."""
    try:
        item = adapter.intake.item(raw)
    except NotAddressed:
        tally(tag, "skipped")      # a group message not addressed to the bot: acknowledged, not stored, by design
        return None
    except MalformedPayload as exc:
        check_rejection(exc)
        tally(tag, "rejected")
        return None
    check_item(item)
    if text_limit is not None:
        assert len(item.payload["text"]) <= text_limit
    tally(tag, "accepted")
    return item
