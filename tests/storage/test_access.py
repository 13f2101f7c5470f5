"""Grants and pairing codes (storage/access.py): issue, remind, expire, approve once, lock out, revoke."""
from __future__ import annotations

import pytest

from storage import NotFound, Store
from storage.access import CODE_ALPHABET, CODE_LENGTH, normalise_code

LIMITS = dict(ttl_s=600.0, max_codes=3, lockout_s=3600.0)


async def test_a_stranger_gets_one_live_code_until_it_expires(db_path):
    async with await Store.open(db_path) as store:
        first = await store.access.request_code("tg", "42", "42", "ann", now=1000.0, **LIMITS)
        assert first.new and first.code.state == "pending"
        assert len(first.code.code) == CODE_LENGTH and set(first.code.code) <= set(CODE_ALPHABET)
        again = await store.access.request_code("tg", "42", "42", "ann", now=1100.0, **LIMITS)
        assert not again.new and again.code.code == first.code.code, "a live code is repeated, not re-issued"
        later = await store.access.request_code("tg", "42", "42", "ann", now=1000.0 + 601, **LIMITS)
        assert later.new and later.code.code != first.code.code, "an expired code is replaced"


async def test_too_many_codes_lock_the_sender_out_until_the_window_moves_on(db_path):
    async with await Store.open(db_path) as store:
        for i in range(3):
            answer = await store.access.request_code("tg", "7", "7", None, now=1000.0 + i * 601, **LIMITS)
            assert answer.new
        locked = await store.access.request_code("tg", "7", "7", None, now=1000.0 + 3 * 601, **LIMITS)
        assert locked.code is None and locked.locked_until == pytest.approx(1000.0 + 3600.0)
        assert (await store.access.request_code("tg", "8", "8", None, now=2803.0, **LIMITS)).new, "others are unaffected"
        free = await store.access.request_code("tg", "7", "7", None, now=1000.0 + 3601, **LIMITS)
        assert free.new


async def test_approval_grants_once_and_expired_or_used_codes_are_refused(db_path):
    async with await Store.open(db_path) as store:
        import time
        answer = await store.access.request_code("tg", "42", "42", "ann", **LIMITS)
        code = answer.code.code
        spaced = f"{code[:4].lower()}-{code[4:]}"
        assert normalise_code(spaced) == code
        approved = await store.access.approve(spaced, by="cli")
        assert approved.user_id == "42"
        assert await store.access.granted_among("tg", ["42", "43"]) == {"42"}
        assert await store.access.granted_among("other", ["42"]) == set(), "a grant is per adapter"
        with pytest.raises(NotFound, match="already approved"):
            await store.access.approve(code)
        stale = await store.access.request_code("tg", "9", "9", None, now=time.time() - 700, **LIMITS)
        with pytest.raises(NotFound, match="expired"):
            await store.access.approve(stale.code.code)
        with pytest.raises(NotFound, match="no pairing code"):
            await store.access.approve("ZZZZ2222")


async def test_deny_revoke_grant_and_listing(db_path):
    async with await Store.open(db_path) as store:
        answer = await store.access.request_code("tg", "5", "5", "bob", **LIMITS)
        assert [c.code for c in await store.access.pending()] == [answer.code.code]
        await store.access.deny(answer.code.code)
        assert await store.access.pending() == []
        await store.access.grant("tg", "5", by="cli")
        assert [(g.adapter, g.user_id, g.granted_by) for g in await store.access.grants()] == [("tg", "5", "cli")]
        assert await store.access.revoke("tg", "5") is True
        assert await store.access.revoke("tg", "5") is False
        assert await store.access.granted_among("tg", ["5"]) == set()


async def test_grants_survive_a_reopen(db_path):
    async with await Store.open(db_path) as s:
        await s.access.grant("tg", "1")
    async with await Store.open(db_path) as s:
        assert await s.access.granted_among("tg", ["1"]) == {"1"}


async def test_the_codes_waiting_for_the_operator_are_capped_per_adapter(db_path):
    async with await Store.open(db_path) as store:
        for user in ("1", "2"):
            assert (await store.access.request_code("tg", user, user, None, now=1000.0, max_pending=2, **LIMITS)).new
        crowd = await store.access.request_code("tg", "3", "3", None, now=1000.0, max_pending=2, **LIMITS)
        assert crowd.code is None and crowd.full and crowd.locked_until is None
        again = await store.access.request_code("tg", "1", "1", None, now=1001.0, max_pending=2, **LIMITS)
        assert again.code is not None and not again.new, "a sender who has a code is still reminded of it"
        assert (await store.access.request_code("other", "3", "3", None, now=1000.0, max_pending=2, **LIMITS)).new
        # Once the waiting codes expire, there is room again.
        assert (await store.access.request_code("tg", "3", "3", None, now=1000.0 + 601, max_pending=2, **LIMITS)).new
