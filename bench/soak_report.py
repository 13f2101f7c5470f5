"""Summary and plot of a soak run (bench/soak.py), from its CSV alone: a run killed half-way still reports.

The verdict compares like with like: mean tree RSS over the window right after warm-up against a window of the same
length at the end of the run; memory per process and per session process shows whether a difference is growth or
just more processes alive (a backlog keeps busy sessions alive, and each session process weighs tens of MiB RSS).
"""
from __future__ import annotations

import csv
import json
import os
import statistics
import sys
from pathlib import Path


def read_rows(csv_path: Path) -> list[dict]:
    with open(csv_path, newline="", encoding="utf-8") as f:
        return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(f)]


def _number(text: str | None):
    if text in ("", None):
        return None
    return float(text) if any(c in text for c in ".en") else int(text)


def percentile(values: list[float], p: float):
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))], 3)


def mean_of(rows: list[dict], value) -> float | None:
    values = [v for v in (value(r) for r in rows) if v is not None]
    return round(statistics.mean(values), 2) if values else None


def growth(early, late) -> float | None:
    return round((late - early) / early * 100, 2) if early and late is not None else None


def summarise(rows: list[dict], warmup_s: float, window_s: float) -> dict:
    """Compare like with like: the same-length windows right after warm-up and at the end of the run."""
    if not rows:
        return {"samples": 0, "verdict_growth_pct": None}
    last = rows[-1]["elapsed_s"]
    window = min(window_s, max(0.0, (last - warmup_s) / 2))
    early = [r for r in rows if warmup_s <= r["elapsed_s"] <= warmup_s + window]
    late = [r for r in rows if r["elapsed_s"] >= last - window and r["elapsed_s"] > warmup_s + window]
    steady = [r for r in rows if r["elapsed_s"] >= warmup_s]
    per_proc = lambda r: r["rss_mib"] / r["processes"] if r["processes"] else None  # noqa: E731 - a table of small formulas reads best inline
    per_session = lambda key: lambda r: r[key] / r["session_procs"] if r["session_procs"] else None  # noqa: E731 - a table of small formulas reads best inline
    out = {"samples": len(rows), "run_s": last, "warmup_end_s": round(warmup_s, 1), "window_s": round(window, 1),
           "early_samples": len(early), "late_samples": len(late)}
    for name, value in (("rss_mib", lambda r: r["rss_mib"]), ("pss_mib", lambda r: r["pss_mib"]),
                        ("rss_mib_per_process", per_proc), ("processes", lambda r: r["processes"]),
                        ("session_procs", lambda r: r["session_procs"]),
                        ("rss_mib_per_session_proc", per_session("session_rss_mib")),
                        ("pss_mib_per_session_proc", per_session("session_pss_mib")),
                        ("session_supervisor_rss_mib", lambda r: r.get("supervisor_rss_mib")),
                        ("session_supervisor_uss_mib", lambda r: r.get("supervisor_uss_mib"))):
        a, b = mean_of(early, value), mean_of(late, value)
        out[name] = {"early": a, "late": b, "growth_pct": growth(a, b)}
    out["rss_mib_max"] = max(r["rss_mib"] for r in rows)
    out["pss_mib_max"] = max(r["pss_mib"] for r in rows)
    out["processes_steady_min_max"] = ([min(r["processes"] for r in steady), max(r["processes"] for r in steady)]
                                       if steady else None)
    out["actor_restarts_last"] = next((r["actor_restarts"] for r in reversed(rows) if r["actor_restarts"] is not None),
                                      None)
    # Other work on the machine slows passivation and so inflates the live count: read growth with this in mind.
    out["loadavg_1m_steady_max"] = max((r.get("loadavg_1m") or 0 for r in steady), default=None)
    # A backlog keeps busy sessions alive and so swells the tree: then the two windows are not alike.
    out["in_flight_steady_max"] = max((r["in_flight"] for r in steady), default=None)
    out["verdict_growth_pct"] = out["rss_mib"]["growth_pct"] if early and late else None
    return out


def plot(rows: list[dict], summary: dict, png_path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    minutes = [r["elapsed_s"] / 60 for r in rows]
    fig, mem = plt.subplots(figsize=(10, 5.5))
    mem.plot(minutes, [r["rss_mib"] for r in rows], label="RSS, whole tree", color="tab:blue")
    mem.plot(minutes, [r["pss_mib"] for r in rows], label="PSS, whole tree", color="tab:green")
    mem.set_xlabel("minutes")
    mem.set_ylabel("MiB")
    mem.set_ylim(bottom=0)
    warm = summary.get("warmup_end_s", 0) / 60
    mem.axvspan(0, warm, color="grey", alpha=0.2, label="warm-up")
    if summary.get("window_s"):
        window = summary["window_s"] / 60
        for start in (warm, minutes[-1] - window):
            mem.axvspan(start, start + window, color="tab:orange", alpha=0.08)
    procs = mem.twinx()
    procs.plot(minutes, [r["processes"] for r in rows], label="processes", color="tab:red", linewidth=0.8)
    procs.plot(minutes, [r["session_procs"] for r in rows], label="session processes", color="tab:purple",
               linewidth=0.8, linestyle="--")
    procs.plot(minutes, [r["in_flight"] for r in rows], label="messages awaiting an answer", color="grey",
               linewidth=0.8, linestyle=":")
    procs.set_ylabel("processes / messages")
    procs.set_ylim(bottom=0)
    (lines, labels), (more, more_labels) = mem.get_legend_handles_labels(), procs.get_legend_handles_labels()
    mem.legend(lines + more, labels + more_labels, loc="upper left", fontsize="small", framealpha=0.8)
    verdict = summary.get("verdict_growth_pct")
    mem.set_title(f"Gateway soak: RSS growth after warm-up {'n/a' if verdict is None else f'{verdict:+.1f}%'} "
                  f"(windows shaded orange)")
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    plt.close(fig)


def report(csv_path: Path, args, outcome: dict) -> int:
    rows = read_rows(csv_path) if csv_path.exists() else []  # interrupted before the first sample
    last = rows[-1]["elapsed_s"] if rows else 0.0
    warmup_s = args.warmup_minutes * 60 if args.warmup_minutes is not None else 0.2 * last
    summary = {**summarise(rows, warmup_s, args.window_minutes * 60), **outcome}
    if rows and "answered" not in outcome:  # from a CSV alone: the counters as of the last sample
        summary.update(sent=rows[-1]["sent"], answered=rows[-1]["answered"],
                       unanswered=rows[-1]["unanswered"], in_flight_at_end=rows[-1]["in_flight"])
    summary["machine"] = {"cpus": os.cpu_count(), "python": sys.version.split()[0]}
    summary["settings"] = {k: v for k, v in vars(args).items() if k != "from_csv"}
    if rows:
        plot(rows, summary, csv_path.with_suffix(".png"))
    csv_path.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    verdict = summary["verdict_growth_pct"]
    failed = (verdict is None or verdict > args.max_growth or (summary.get("unanswered") or 0) > 0
              or (summary.get("in_flight_at_end") or 0) > 0)
    print(f"\nwarm-up ended at {summary.get('warmup_end_s', 0) / 60:.1f} min; tree RSS "
          f"{summary.get('rss_mib', {}).get('early')} -> {summary.get('rss_mib', {}).get('late')} MiB "
          f"({'n/a' if verdict is None else f'{verdict:+.2f}%'}, limit {args.max_growth:g}%); "
          f"max {summary.get('rss_mib_max')} MiB; answered {summary.get('answered')}, unanswered "
          f"{summary.get('unanswered')}; plot {csv_path.with_suffix('.png')}: "
          f"{'INTERRUPTED' if outcome.get('interrupted') else 'FAIL' if failed else 'PASS'}")
    if summary.get("sender_held") or (summary.get("in_flight_steady_max") or 0) >= args.max_in_flight:
        print("the load was NOT steady (a backlog of unanswered messages; see in_flight_steady_max, sender_held, "
              "loadavg_1m_steady_max): memory follows the backlog, so this run says little about growth")
    if outcome.get("interrupted"):
        return 130
    return 1 if failed else 0
