"""Who may talk to the agent (G5), through the real daemon and the fake Telegram server: a stranger gets a pairing
code and causes no turn; the operator approves it from the CLI; an allowlist ignores strangers silently."""
from __future__ import annotations

import json
import re
import sqlite3

import pytest

from actors.adapters.access import AccessPolicy, Reminders, address_entry_problem, decide, policy_of
from storage import InboundItem
from tests.actor_system import wait_for
from tests.gateway import Gateway
from tests.fakes.telegram import FakeTelegram
from tests.pipeline.harness import CURSOR

pytestmark = pytest.mark.timeout(180)


def gateway(tmp_path, tg: FakeTelegram, access: str) -> Gateway:
    return Gateway(tmp_path, extra_toml=f"""
[adapters.telegram]
type = "telegram"
token = "{tg.token}"
base_url = "{tg.base_url}"
poll_timeout_s = 1.0
allow = ["555"]
{access}
[agent]
chunk_delay_s = 0.0
""")


def inbox_senders(gw: Gateway) -> list[str]:
    with sqlite3.connect(gw.state / "gateway.db") as db:
        return [mid.split(":")[0] for (mid,) in db.execute("SELECT platform_message_id FROM inbox")]


def bot_texts(tg: FakeTelegram, chat: int) -> list[str]:
    return [m["text"] for m in tg.messages(chat) if not m["deleted"]]


def answered(tg: FakeTelegram, chat: int, question: str):
    return [t for t in bot_texts(tg, chat) if question in t and CURSOR not in t]


def test_a_stranger_gets_a_code_causes_no_turn_and_talks_once_approved(tmp_path):
    with FakeTelegram() as tg:
        gw = gateway(tmp_path, tg, "")          # telegram's default: pairing
        try:
            gw.start()
            gw.wait_ready()
            tg.inject_message("hello from the allowlist", chat_id=555)
            wait_for(lambda: answered(tg, 555, "hello from the allowlist"), 60, 0.05, "the allowed user's answer")
            tg.inject_message("let me in", chat_id=777)
            [offer] = wait_for(lambda: bot_texts(tg, 777), 30, 0.05, "the pairing reply")
            code = re.search(r"pair approve ([A-Z0-9]{8})", offer).group(1)
            assert "pairing code" in offer and "let me in" not in offer
            tg.inject_message("still me", chat_id=777)
            wait_for(lambda: tg.stats()["requests"].get("getUpdates", 0) and not tg.pending_updates(), 10, 0.05,
                     "the second message to be taken")
            listed = json.loads(gw.cli("pair", "list", "--json", check=True).stdout)
            assert [(c["user_id"], c["code"]) for c in listed["pending"]] == [("777", code)]
            assert inbox_senders(gw) == ["555"], "nothing a stranger wrote reached an inbox"
            assert len(bot_texts(tg, 777)) == 1, "a pending stranger is reminded at most once a minute"
            assert gw.cli("pair", "approve", code.lower()).returncode == 0
            again = gw.cli("pair", "approve", code)
            assert again.returncode == 1 and "already approved" in again.stderr
            tg.inject_message("now may I?", chat_id=777)
            wait_for(lambda: answered(tg, 777, "now may I?"), 60, 0.05, "the approved user's answer")
            assert sorted(inbox_senders(gw)) == ["555", "777"], "only the message after the approval was stored"
            assert code not in gw.log(), "the code is for the operator's CLI, not for the log"
            assert gw.cli("pair", "revoke", "telegram", "777").returncode == 0
            tg.inject_message("and now?", chat_id=777)
            wait_for(lambda: sum("pairing code" in t for t in bot_texts(tg, 777)) == 2, 30, 0.05,
                     "a new code after the revocation")
            assert not answered(tg, 777, "and now?")
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_an_allowlist_ignores_strangers_without_a_word(tmp_path):
    with FakeTelegram() as tg:
        gw = gateway(tmp_path, tg, 'access = "allowlist"')
        try:
            gw.start()
            gw.wait_ready()
            tg.inject_message("anyone there?", chat_id=888)
            tg.inject_message("allowed one", chat_id=555)
            wait_for(lambda: answered(tg, 555, "allowed one"), 60, 0.05, "the allowed user's answer")
            wait_for(lambda: "message from user 888 ignored: not on the allowlist" in gw.log(), 10, 0.05,
                     "the refusal in the log")
            assert bot_texts(tg, 888) == [] and inbox_senders(gw) == ["555"]
        finally:
            gw.cli("stop")
            gw.kill_everything()


def item(user, internal=False) -> InboundItem:
    return InboundItem("k", "tg", f"1:{user}", {"source": {"user_id": user, "chat_id": "1"}, "internal": internal})


def test_decide_sorts_a_batch_by_policy():
    batch = [item("1"), item("2"), item(None), item("3", internal=True)]
    assert decide(AccessPolicy("open"), batch, set()).admitted == batch
    pairing = decide(AccessPolicy("pairing", allow=frozenset({"1"})), batch, {"2"})
    assert pairing.admitted == [batch[0], batch[1], batch[3]] and pairing.refused[0][0] is batch[2]
    allowlist = decide(AccessPolicy("allowlist"), batch, set())
    assert allowlist.admitted == [batch[3]] and [r for _, r in allowlist.refused].count("not on the allowlist") == 2
    stranger = decide(AccessPolicy("pairing"), [item("9")], set())
    assert stranger.to_pair == [item("9")] and not stranger.admitted


def test_where_user_ids_are_addresses_an_entry_matches_in_any_case_and_may_name_a_domain():
    allow = ["Alice@Example.org", "@Friends.test", "@.partners.test"]
    email = policy_of({"access": "allowlist", "allow": allow}, "allowlist", addresses=True)
    admitted = ["alice@example.org", "ALICE@example.ORG", "dave@friends.test", "Erin@FRIENDS.test",
                "frank@eu.partners.test", "gina@a.b.partners.test"]
    refused = ["bob@example.org", "dave@sub.friends.test", "dave@friends.test.evil", "gina@partners.test",
               "gina@xpartners.test", "@friends.test", "friends.test", "dave@friends", None]
    assert [u for u in admitted if not email.admits_without_lookup(u)] == []
    assert [u for u in refused if email.admits_without_lookup(u)] == []
    # Elsewhere an entry is an exact user id: a Matrix id begins with "@" and names no domain.
    matrix = policy_of({"access": "allowlist", "allow": ["@alice:example.org", "@.example.org"]}, "allowlist")
    assert matrix.admits_without_lookup("@alice:example.org")
    assert not matrix.admits_without_lookup("@Alice:example.org")
    assert not matrix.admits_without_lookup("a@x.example.org")
    assert [e for e in ("a@example.org", "@example.org", "@.example.org") if address_entry_problem(e)] == []
    for wrong in ("example.org", "@", "@.", "a@.example.org", "a b@example.org", "12345", 12345, "@@example.org",
                  "a@example..org"):
        assert address_entry_problem(wrong), wrong


def test_reminders_are_due_for_a_new_code_or_once_a_minute():
    r = Reminders(every_s=60)
    assert r.due("u", new_code=False, now=0) and not r.due("u", new_code=False, now=30)
    assert r.due("u", new_code=True, now=31) and r.due("u", new_code=False, now=95)


def test_when_the_operator_has_max_pending_codes_waiting_a_new_stranger_gets_nothing(tmp_path):
    import asyncio

    from actors.adapters.access import Gatekeeper
    from storage import Store

    def item(user: str) -> InboundItem:
        return InboundItem(f"k{user}", "tg", f"m{user}", {"source": {"chat_id": user, "user_id": user}})

    async def main():
        store = await Store.open(tmp_path / "gateway.db")
        try:
            keeper = Gatekeeper("tg", AccessPolicy(mode="pairing", max_pending=2))
            replies, said = [], []
            for user in ("1", "2", "3", "4"):
                assert await keeper.admit(store, [item(user)], replies.append,
                                          lambda level, text, *args: said.append(text % args)) == []
            return replies, said
        finally:
            await store.close()
    replies, said = asyncio.run(main())
    assert [op.chat_id for op in replies] == ["1", "2"], "only the first two strangers got a code"
    full = [line for line in said if "pairing codes are waiting for the operator" in line]
    assert len(full) == 1, said
