"""The benchmark results as a markdown table and as PNG plots (latency distribution, throughput over time).

Input is the dict bench/run_benchmarks.py builds (and writes as results.json), so the table and plots can be made
again from a results file: ``python bench/bench_report.py docs/bench/results.json`` (rewrites results.md and the
plots next to it).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # run as a script: the repo's packages
from daemon import cli_rich


def _ratio(gateway, baseline) -> str:
    if not isinstance(gateway, (int, float)) or not isinstance(baseline, (int, float)) or not baseline:
        return "–"
    r = gateway / baseline
    return f"{r:.0f}×" if r >= 100 else f"{r:.1f}×" if r >= 1 else f"{r:.2g}×"


def _cell(value, unit: str = "") -> str:
    if value is None:
        return "–"
    return f"{value:g}{unit}" if isinstance(value, (int, float)) else str(value)


def _unfinished(*runs) -> str:
    late = [f"{label} answered {run['burst_answered']} by the deadline" for label, run in zip(("gateway", "baseline"),
            runs) if not run.get("burst_complete", True)]
    return f" ({'; '.join(late)})" if late else ""


def rows(r: dict) -> list[tuple[str, object, object, str]]:
    """(figure, gateway, baseline, unit); a baseline of None means the figure has no baseline analogue."""
    g, b, n = r["gateway"], r["baseline"], r["parameters"]
    gs, bs, k, rec, dr = r["gateway_start"], r["baseline_start"], r["restart"], r["recovery"], r["drain"]
    return [
        (f"overhead per turn, p50 ({n['latency']} sequential turns, warm chat)", g["overhead_ms_p50"],
         b["overhead_ms_p50"], " ms"),
        ("overhead per turn, p99", g["overhead_ms_p99"], b["overhead_ms_p99"], " ms"),
        ("CPU per warm turn (whole process tree)", g.get("cpu_ms_per_turn"), b.get("cpu_ms_per_turn"), " ms"),
        (f"overhead at a steady {g['rate_per_s']:g} new chats/s, p50 ({g['rate_turns']} turns)", g["rate_ms_p50"],
         b["rate_ms_p50"], " ms"),
        ("overhead at a steady rate, p99", g["rate_ms_p99"], b["rate_ms_p99"], " ms"),
        (f"throughput, {g['burst_sessions']} fresh chats at once{_unfinished(g, b)}", g["turns_per_s"],
         b["turns_per_s"], " turns/s"),
        (f"time to the last of {g['burst_sessions']} replies", g["burst_s"] if g.get("burst_complete", True)
         else f"> {g['burst_s']:g} s ({g['burst_answered']} answered)", b["burst_s"], " s"),
        ("memory per session (PSS growth over the burst / sessions made live)", g["mib_per_session"],
         b["mib_per_session"], " MiB"),
        ("memory of the idle daemon (whole tree PSS before the first message)", g.get("idle_pss_mib"),
         b.get("idle_pss_mib"), " MiB"),
        ("sessions live after the burst (cells of the shards)", g.get("live_sessions"), None, ""),
        ("start-to-ready (`run_gateway.py start` wall; baseline: spawn to first poll), p50",
         round(gs["start_command_s_p50"], 3), bs["start_s_p50"], " s"),
        ("start-to-ready inside the launcher (every actor up), p50", round(gs["launcher_ready_s_p50"], 3), None,
         " s"),
        (f"restart after SIGKILL of an actor, p50 ({k['kills']} kills)", k["restart_ms_p50"], None, " ms"),
        ("restart after SIGKILL of an actor, p99", k["restart_ms_p99"], None, " ms"),
        *_shard_kill_rows(r.get("shard_kill")),
        (f"recovery of {rec['unfinished_at_kill']} pending replies after kill -9 (start to all final)",
         rec["recovery_s"], None, " s"),
        (f"drain with {dr.get('streaming_at_drain', dr['in_flight'])} of {dr['in_flight']} turns still streaming "
         f"(to exit {dr['exit_code']}; {dr['whole_answers']}/{dr['in_flight']} answered whole)", dr["drain_s"],
         None, " s"),
        ("drain: exit after the last reply was final", dr["exit_after_last_reply_s"], None, " s"),
    ]


def _shard_kill_rows(sk: dict | None) -> list:
    if not sk:
        return []   # a results.json from before the phase existed
    return [(f"a shard killed with -9: kill to the answer of a message sent at the kill, p50 ({sk['shard_kills']} "
             f"kills)", sk["served_again_ms_p50"], None, " ms"),
            ("a shard killed with -9: kill to that answer, p99", sk["served_again_ms_p99"], None, " ms")]


def markdown(r: dict) -> str:
    lines = _head(r) + ["", "| figure | gateway | baseline | ratio |", "|---|---|---|---|"]
    for figure, gateway, baseline, unit in rows(r):
        lines.append(f"| {figure} | {_cell(gateway, unit)} | {_cell(baseline, unit)} | "
                     f"{_ratio(gateway, baseline)} |")
    return "\n".join(lines + [""] + _tail(r) + [""])


def show(r: dict) -> None:
    """The report on stdout: the markdown of results.md through a pipe, a drawn table on a terminal."""
    if not cli_rich.for_a_person():
        print(markdown(r))
        return
    console = cli_rich.console()
    console.print(cli_rich.styled("\n".join(_head(r)), ""))
    figures = [[figure, _cell(g, unit), _cell(b, unit), _ratio(g, b)] for figure, g, b, unit in rows(r)]
    console.print(cli_rich.table(["figure", "gateway", "baseline", "ratio"], figures,
                                 right=("gateway", "baseline", "ratio"), wrap=("figure",)))
    console.print(cli_rich.styled("\n\n".join(_tail(r)), "dim"))


def _head(r: dict) -> list[str]:
    m = r["machine"]
    return [f"Command: `{r['command']}` (wall {r.get('wall_s', '?')} s)", "",
            f"Machine: {m['cpus']} CPUs ({m['cpu_model']}), {m['ram_gib']} GiB RAM, Python {m['python']}, "
            f"Thespian {m['thespian']}, {m['os']}; load average at start {m['load_avg_at_start']}; {m['date']}."]


def _tail(r: dict) -> list[str]:
    rec, dr = r["recovery"], r["drain"]
    return [f"Recovery: {rec['unfinished_at_kill']} replies unfinished in the ledger at the kill "
            f"({rec['ledger_at_kill']}); the new instance was ready after {rec['start_ready_s']} s; "
            f"chats showing a reply twice without the re-sent mark: {rec['duplicates']}; with a copy re-sent "
            f"under the mark (a send whose outcome died with the daemon): {rec.get('marked_resends', '-')}.",
            f"Drain: exit code {dr['exit_code']}, turns left in flight {dr['in_flight_left']}, the last reply was "
            f"final {dr['last_reply_after_s']} s after the drain began (the slow agent's own time)."]


def plots(r: dict, out: Path) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, data, style in (("gateway", r["gateway"], "-"), ("baseline relay", r["baseline"], "--")):
        values = sorted(v * 1000 for v in data["latency_s"])
        ax.step(values, [(i + 1) / len(values) for i in range(len(values))], style, where="post",
                label=f"{label} (p50 {data['overhead_ms_p50']:g} ms, p99 {data['overhead_ms_p99']:g} ms)")
    ax.set_xscale("log")
    ax.set_xlabel("inbound on the platform → final reply on the platform (ms, log scale)")
    ax.set_ylabel("fraction of turns")
    ax.set_title(f"Overhead per turn, {len(r['gateway']['latency_s'])} sequential turns, zero-latency agent")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    made.append(out / "latency.png")
    fig.savefig(made[-1], dpi=110)
    plt.close(fig)

    fig, (cumulative, rate) = plt.subplots(2, 1, figsize=(7, 6.4))
    for label, data, style in (("gateway", r["gateway"], "-"), ("baseline relay", r["baseline"], "--")):
        done = data.get("burst_done_s") or []
        if not done:
            continue
        cumulative.step(done, range(1, len(done) + 1), style, where="post",
                        label=f"{label} ({data['turns_per_s']:g} turns/s overall, last at {data['burst_s']:g} s)")
        # A bin width that fits each run: the baseline's burst is over in well under a second.
        width = max(0.01, done[-1] / 40)
        bins = [0] * (int(done[-1] / width) + 1)
        for t in done:
            bins[int(t / width)] += 1
        rate.plot([(i + 0.5) * width for i in range(len(bins))], [c / width for c in bins], style, marker=".",
                  label=f"{label} (bins of {width:.2g} s)")
    cumulative.set_xscale("log")
    cumulative.set_ylabel("turns answered so far")
    cumulative.set_xlabel("seconds since the burst was injected (log scale)")
    cumulative.set_title(f"Throughput over time, {r['gateway']['burst_sessions']} fresh chats at once")
    rate.set_xscale("log")
    rate.set_yscale("log")
    rate.set_ylabel("turns answered per second")
    rate.set_xlabel("seconds since the burst was injected (log scale)")
    for ax in (cumulative, rate):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    made.append(out / "throughput.png")
    fig.savefig(made[-1], dpi=110)
    plt.close(fig)
    return made


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/bench/results.json")
    results = json.loads(path.read_text())
    plots(results, path.parent)
    (path.parent / "results.md").write_text(markdown(results))
    show(results)
