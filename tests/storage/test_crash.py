"""kill -9 of a writer at arbitrary points inside its transactions, 30 times on one growing database (a file, or a
PostgreSQL schema): after each, the database passes integrity_check (SQLite), opens, and holds every commit the
writer reported (bench: --crash-trials N)."""
import random

from .workers import run_crash_trial, verify_after_crash

TRIALS = 30


def test_kill_9_loses_nothing_that_was_committed(db_path):
    path = str(db_path)   # a file, or a PostgreSQL schema (the server rolls back what the dead writer left open)
    rng = random.Random(20240603)
    reported, killed_in_transaction = [], 0
    for trial in range(TRIALS):
        kill_after = 0 if trial in (0, 7) else rng.randint(1, 40)  # 0: killed while opening / migrating
        lines = run_crash_trial(path, seed=trial, kill_after=kill_after, in_transaction=trial % 3 != 0)
        killed_in_transaction += bool(lines) and lines[-1] == "tick 1"
        reported.extend(lines)
        verify_after_crash(path, reported)
    commits = [line for line in reported if not line.startswith("tick")]
    assert len(commits) > TRIALS * 3
    assert killed_in_transaction >= TRIALS // 3  # the kills really land inside transactions
