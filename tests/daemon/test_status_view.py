"""The adapter states `status` shows and the health judged from them (actors/adapters/connection.py,
daemon/status_view.py, daemon/health.py): pure, on made-up tree nodes and status answers."""
from __future__ import annotations

from actors.adapters.connection import ConnectionView, adapter_rows
from actors.messages import GatewayStatus
from daemon import health
from daemon.status_view import adapter_line, health_of
from supervision.messages import TreeNode


def node(name, kind="WebChatAdapter", state="running", facts=(), children=(), last_exit=None, restarts=0):
    return TreeNode(kind=kind, name=name, pid=1, address="", state=state, started_at=0.0, facts=facts,
                    children=children, last_exit=last_exit, restarts=restarts)


def tree(*adapters):
    return node("root", "Root", children=(node("adapters", "AdapterSupervisor", children=adapters),))


def status(rows, failed=0, restarting=0, draining=False):
    return GatewayStatus(started_at=0.0, actors_up=5, actors_restarting=restarting, actors_failed=failed,
                         sessions_live=0, obligations_pending=0, draining=draining, detail={"adapters": rows})


def test_retrying_counts_from_when_the_connection_went_down_not_from_the_last_attempt():
    view = ConnectionView(now=100.0)
    view.retrying("refused", 1, now=101.0)
    assert dict(view.facts())["since"] == 100.0            # never up: down since the start
    view.connected(now=110.0)
    view.retrying("reset   by\npeer", 1, now=120.0)
    view.retrying("refused", 2, now=125.0)
    facts = dict(view.facts("http://127.0.0.1:1/"))
    assert facts == {"connection": "retrying", "since": 120.0, "attempts": 2, "error": "refused",
                     "url": "http://127.0.0.1:1/", "messages_in": 0, "messages_out": 0}
    view.connected(now=130.0)
    assert dict(view.facts()) == {"connection": "connected", "since": 130.0, "messages_in": 0, "messages_out": 0}


def test_rows_take_the_trees_word_for_adapters_that_crashed_or_were_given_up():
    view = ConnectionView(now=1.0)
    view.retrying("address already in use", 3, now=2.0)
    rows = adapter_rows(tree(node("web", facts=view.facts()), node("cli", "CliAdapter"),
                             node("tg", "TelegramAdapter", state="restarting", last_exit="IntakeFailed: bad token",
                                  facts=(("connection", "connected"),)),
                             node("api", "HttpApiAdapter", state="failed")))
    assert rows == [
        {"name": "web", "kind": "WebChatAdapter", "state": "retrying", "since": 1.0, "attempts": 3,
         "error": "address already in use", "messages_in": 0, "messages_out": 0},
        {"name": "cli", "kind": "CliAdapter", "state": "up"},
        {"name": "tg", "kind": "TelegramAdapter", "state": "restarting", "error": "IntakeFailed: bad token"},
        {"name": "api", "kind": "HttpApiAdapter", "state": "failed"},
    ]


def test_healthy_only_with_every_adapter_up_and_connecting_is_not_down_yet():
    up = [{"name": "web", "kind": "W", "state": "connected"}, {"name": "cli", "kind": "C", "state": "up"}]
    assert health_of(status(up)) == ("healthy", [])
    assert health_of(status(up + [{"name": "tg", "kind": "T", "state": "connecting"}])) == ("healthy", [])
    down = up + [{"name": "tg", "kind": "T", "state": "retrying", "error": "getMe: network error"}]
    assert health_of(status(down)) == ("degraded", ["adapter tg retrying: getMe: network error"])
    assert health_of(status(up, restarting=1))[0] == "degraded"
    assert health_of(status(up, draining=True))[0] == "draining"


def test_liveness_ignores_the_platforms_readiness_does_not():
    rows = [{"name": "tg", "kind": "T", "state": "connecting"}]
    assert health.verdict(status(rows), ready=False) == []
    assert health.verdict(status(rows), ready=True) == ["adapter tg connecting"]
    assert health.verdict(status([], failed=1), ready=False) == ["1 actor(s) failed"]
    assert health.verdict(status([], restarting=1), ready=False) == []
    assert health.verdict(status([], draining=True), ready=True) == ["draining"]
    data, line, code = health.summary(status([{"name": "w", "kind": "W", "state": "connected"}]), 42, ready=True)
    assert code == 0 and line == "ready: pid 42, 5 actors up, 1 of 1 adapters connected" and data["ok"]


def test_an_adapter_line_says_for_how_long_and_why():
    row = {"name": "web", "kind": "WebChatAdapter", "state": "retrying", "since": 1000.0, "attempts": 7,
           "error": "address already in use"}
    assert adapter_line(row, now=1125.0, name_width=4, kind_width=14) == \
        "web  WebChatAdapter retrying for 2m05s (attempt 7): address already in use"
    up = {"name": "web", "kind": "WebChatAdapter", "state": "connected", "since": 1000.0, "url": "http://h:1/"}
    assert adapter_line(up, now=1003.0, name_width=4, kind_width=14) == "web  WebChatAdapter connected 3s  http://h:1/"



def test_an_adapter_connecting_again_after_crashes_is_down_with_its_last_crash():
    facts, crash = (("connection", "connecting"), ("since", 5.0)), "IntakeFailed: permanent error: getMe: Unauthorized"
    [first_start] = adapter_rows(tree(node("tg", "TelegramAdapter", facts=facts)))
    assert first_start == {"name": "tg", "kind": "TelegramAdapter", "state": "connecting", "since": 5.0}
    assert health_of(status([first_start])) == ("healthy", [])
    [row] = adapter_rows(tree(node("tg", "TelegramAdapter", facts=facts, last_exit=crash, restarts=3)))
    assert row["restarts"] == 3 and row["error"] == crash
    assert health_of(status([row])) == ("degraded", [f"adapter tg connecting after 3 restart(s): {crash}"])
    assert f"connecting for 5s after 3 restart(s): {crash}" in adapter_line(row, now=10.0)


def test_a_configured_adapter_missing_from_the_tree_is_restarting():
    rows = adapter_rows(tree(), {"tg": "TelegramAdapter"})
    assert rows == [{"name": "tg", "kind": "TelegramAdapter", "state": "restarting"}]
    assert health_of(status(rows)) == ("degraded", ["adapter tg restarting"])


def test_status_counts_the_media_cache():
    from types import SimpleNamespace

    from daemon.status_view import report
    from storage import CacheStats
    status = SimpleNamespace(actors_failed=0, actors_restarting=0, actors_up=3, draining=False, detail={},
                             started_at=0.0, sessions_live=0, obligations_pending=0)
    config = {"gateway": {"state_dir": "/s"}, "metrics": {"enabled": False}}
    data, text, _code = report(status, {"launcher_pid": 1}, "127.0.0.1:1", config, now=10.0,
                               media=CacheStats(3, 5 * 1024 * 1024))
    assert (data["media_files"], data["media_bytes"]) == (3, 5 * 1024 * 1024)
    assert "  media        3 file(s), 5 MB cached" in text.splitlines()


def test_status_shows_the_scheduler_when_jobs_are_configured():
    from daemon.status_view import report
    config = {"metrics": {"enabled": False}, "gateway": {"state_dir": "/s"}}
    answer = GatewayStatus(started_at=0.0, actors_up=5, actors_restarting=0, actors_failed=0, sessions_live=0,
                           obligations_pending=0, draining=False,
                           detail={"adapters": [], "cron": {"jobs": 2, "runs": 7, "skipped": 1}})
    data, text, _code = report(answer, {"launcher_pid": 1}, "127.0.0.1:1", config, now=10.0)
    assert "cron         2 job(s); since this start 7 run(s), 1 skipped" in text and data["cron"]["runs"] == 7
    plain = GatewayStatus(**{**vars(answer), "detail": {"adapters": []}})
    assert "cron " not in report(plain, {"launcher_pid": 1}, "127.0.0.1:1", config, now=10.0)[1]


def test_a_lost_host_makes_the_gateway_degraded_and_is_named():
    hosts = [{"name": "leader", "state": "running", "address": "a", "since": 0.0, "role": "leader"},
             {"name": "w2", "state": "lost", "address": "b", "since": 5.0, "role": "worker"}]
    answer = GatewayStatus(started_at=0.0, actors_up=5, actors_restarting=0, actors_failed=0, sessions_live=0,
                           obligations_pending=0, draining=False, detail={"adapters": [], "hosts": hosts})
    assert health_of(answer) == ("degraded", ["host w2 lost: what it runs is unavailable"])
    hosts[1]["state"] = "running"
    assert health_of(answer) == ("healthy", [])


def test_a_paused_adapter_is_down_with_who_paused_it_and_ignores_its_old_intakes_reports():
    view = ConnectionView(now=1.0)
    view.connected(now=2.0)
    view.messages_in, view.messages_out = 3, 2
    view.paused("cli:ada", now=5.0)
    view.connected(now=6.0)                      # the halted intake's last report, read after the pause
    view.retrying("reset", 1, now=6.0)
    facts = dict(view.facts())
    assert facts == {"connection": "paused", "since": 5.0, "paused_by": "cli:ada", "messages_in": 3,
                     "messages_out": 2}
    rows = adapter_rows(tree(node("tg", "TelegramAdapter", facts=view.facts())))
    assert health_of(status(rows)) == ("degraded", ["adapter tg paused by cli:ada"])
    view.resumed(now=7.0)
    assert dict(view.facts())["connection"] == "connecting"
