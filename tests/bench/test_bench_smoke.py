"""The baseline relay the benchmarks compare the gateway against: it answers through the same fake platform, once
per message, with the offline agent's answer and the chat's history (no timing here: bench/ measures speed)."""
from __future__ import annotations

import io
import re
import sys

import pytest

from bench.benchlib import BaselineProcess, final_times, per_second, percentile
from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform

pytestmark = pytest.mark.timeout(30)


def test_the_baseline_relay_answers_every_message_once_with_the_offline_agent():
    with FakePlatform() as platform, BaselineProcess(platform.base_url):
        platform.inject("a", "first question")
        platform.inject("b", "another chat")
        wait_for(lambda: len(final_times(platform, ["a", "b"])) == 2, 10, 0.02, "an answer in each chat")
        platform.inject("a", "second question")
        wait_for(lambda: len(platform.final_texts("a")) == 2, 10, 0.02, "the second answer in chat a")
        first, second = platform.final_texts("a")
        assert 'You said: "first question"' in first and "offline agent" in first
        assert 'You said: "second question"' in second and "2 messages from you" in second
        [other] = platform.final_texts("b")
        assert 'You said: "another chat"' in other and "1 message from you" in other
        assert all(len(m["history"]) == 1 for m in platform.messages("a")), "one send, no edits"


def test_the_shared_figures_helpers():
    assert percentile([3, 1, 2], 50) == 2 and percentile([1, 2, 3, 4], 99) == 4
    assert per_second([10.1, 10.5, 12.9], start=10.0) == [2, 0, 1]


def synthetic_results() -> dict:
    pipeline = {"latency_s": [0.001 * (i + 1) for i in range(10)], "overhead_ms_p50": 5.0, "overhead_ms_p99": 10.0,
                "rate_per_s": 5.0, "rate_turns": 10, "rate_ms_p50": 6.0, "rate_ms_p99": 12.0, "burst_sessions": 4,
                "burst_s": 0.4, "turns_per_s": 10.0, "burst_per_second": [4], "burst_done_s": [0.1, 0.2, 0.3, 0.4],
                "mib_per_session": 0.5}
    return {
        "command": "python bench/run_benchmarks.py --quick", "wall_s": 1.0, "parameters": {"latency": 10},
        "machine": {"cpus": 2, "cpu_model": "cpu", "ram_gib": 1.0, "python": "3.11", "thespian": "4.0.1",
                    "os": "Linux", "load_avg_at_start": [0.1, 0.1, 0.1], "date": "today"},
        "baseline": dict(pipeline),
        "gateway": {**pipeline, "overhead_ms_p50": 50.0, "session_pss_mib_mean": 10.0, "live_sessions": 4},
        "baseline_start": {"start_s_p50": 0.5}, "gateway_start": {"start_command_s_p50": 1.0,
                                                                  "launcher_ready_s_p50": 0.2},
        "restart": {"kills": 3, "restart_ms_p50": 20.0, "restart_ms_p99": 40.0},
        "recovery": {"obligations": 5, "unfinished_at_kill": 5, "ledger_at_kill": {}, "recovery_s": 2.0,
                     "start_ready_s": 0.5, "duplicates": 0},
        "drain": {"in_flight": 5, "streaming_at_drain": 5, "exit_code": 0, "whole_answers": 5, "drain_s": 3.0,
                  "exit_after_last_reply_s": 0.5, "in_flight_left": 0, "last_reply_after_s": 2.5},
    }


def test_the_report_table_has_a_row_per_figure_with_a_ratio_where_there_is_a_baseline():
    from bench import bench_report
    table = bench_report.markdown(synthetic_results())
    assert "| figure | gateway | baseline | ratio |" in table and "Thespian 4.0.1" in table
    assert "| overhead per turn, p50 (10 sequential turns, warm chat) | 50 ms | 5 ms | 10.0× |" in table
    assert "| restart after SIGKILL of an actor, p50 (3 kills) | 20 ms | – | – |" in table


def test_the_report_writes_the_latency_and_throughput_plots(tmp_path):
    pytest.importorskip("matplotlib")
    from bench import bench_report
    made = bench_report.plots(synthetic_results(), tmp_path)
    assert [p.name for p in made] == ["latency.png", "throughput.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in made)


class Terminal(io.StringIO):
    """What a benchmark prints to, standing in for a person's terminal."""

    def isatty(self) -> bool:
        return True


def test_a_printed_table_is_the_plain_lines_through_a_pipe_and_drawn_on_a_terminal(monkeypatch, capsys):
    from bench import tables
    columns, rows = ["victim", "trials"], [["session", 3], ["shard", 12]]
    plain = ["victim      trials", "session          3", "shard           12"]
    tables.show(columns, rows, plain, right=("trials",))
    assert capsys.readouterr().out == "\n".join(plain) + "\n"
    with tables.growing(columns, plain[0], right=("trials",)) as add:
        for row, line in zip(rows, plain[1:]):
            add(row, line)
    assert capsys.readouterr().out == "\n".join(plain) + "\n", "each row as it comes, the same lines"

    terminal = Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    tables.show(columns, rows, plain, right=("trials",))
    with tables.growing(columns, plain[0], right=("trials",)) as add:
        for row, line in zip(rows, plain[1:]):
            add(row, line)
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal.getvalue())
    assert "\x1b[" in terminal.getvalue() and "─" in drawn, "a table with a rule under its header"
    assert "victim      trials" not in drawn and re.search(r"shard +12", drawn)


def test_the_report_through_a_pipe_is_the_markdown_of_results_md(capsys):
    from bench import bench_report
    bench_report.show(synthetic_results())
    assert capsys.readouterr().out == bench_report.markdown(synthetic_results()) + "\n"
