"""``cron list`` as text (daemon/cli_cron.py) and the command's help: pure, no gateway."""
from __future__ import annotations

import pytest

import run_gateway
from daemon.cli_cron import _render_list

JOB = {"job": "morning", "schedule": "0 9 * * *", "timezone": "UTC", "adapter": "tg", "chat": "42", "thread": None,
       "catch_up": "skip", "enabled": True, "paused": False, "next_at": 1767258000.0}


def test_the_list_says_where_each_job_answers_when_it_runs_next_and_how_its_runs_ended():
    runs = [{"origin": "schedule", "scheduled_at": 1767171600.0, "outcome": "skipped", "caught_up": True,
             "reason": "missed while the gateway was down (3 time(s))", "inbox_state": None},
            {"origin": "manual", "scheduled_at": 1767170000.0, "outcome": "injected", "caught_up": False,
             "reason": None, "inbox_state": "done"}]
    text = _render_list([dict(JOB, runs=runs), dict(JOB, job="night", paused=True, runs=[])])
    assert "morning  '0 9 * * *' (UTC)  -> tg:42  catch_up=skip  next 2026-01-01 09:00:00 UTC" in text
    assert "skipped: missed while the gateway was down (3 time(s))" in text and "manual   " in text
    assert "night" in text and "PAUSED" in text
    assert "no jobs" in _render_list([])


def test_cron_help_explains_the_catch_up_rule_and_every_action(capsys):
    with pytest.raises(SystemExit) as done:
        run_gateway.build_parser().parse_args(["cron", "--help"])
    assert done.value.code == 0
    shown = capsys.readouterr().out
    assert "catch_up" in shown and all(action in shown for action in ("list", "run", "pause", "resume"))


def test_a_run_asked_for_while_no_gateway_runs_is_stored_for_the_next_start(tmp_path, monkeypatch, capsys):
    """With no gateway to ask, `cron run` claims the run and stores its prompt itself: the shards ring every session
    with rows waiting when they start, so the next start answers it."""
    import asyncio
    import json

    from common import config as config_mod
    from daemon.cli_cron import cmd_cron
    from storage import CRON_PLATFORM, Store

    monkeypatch.setenv("GATEWAY_STATE_DIR", str(tmp_path / "state"))
    path = tmp_path / "gateway.toml"
    path.write_text('[adapters.fake]\ntype = "fake"\nbase_url = "http://127.0.0.1:9"\n[cron.morning]\n'
                    'schedule = "0 9 * * *"\nprompt = "good morning"\nadapter = "fake"\nchat = "42"\n')
    config = config_mod.load(str(path))
    db = tmp_path / "state" / "gateway.db"
    db.parent.mkdir()

    async def open_and_close():   # the database a gateway that ran once leaves
        await (await Store.open(db)).close()

    async def waiting_rows():
        async with await Store.open(db) as store:
            [run] = await store.cron.runs("morning")
            return await store.inbox.rows_in_state(run.session_key)
    asyncio.run(open_and_close())
    assert cmd_cron(config, run_gateway.build_parser().parse_args(["cron", "run", "morning", "--json"])) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["ok"] and answer["queued"] and answer["run_id"].startswith("morning:manual:")
    [row] = asyncio.run(waiting_rows())
    assert row.platform == CRON_PLATFORM and row.payload["internal"] and row.payload["text"] == "good morning"
