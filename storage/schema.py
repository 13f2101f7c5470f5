"""The schema, as forward migrations. Version N of the schema is ``MIGRATIONS[:N]`` applied in order.

Never edit a released step: append a new one. A database whose version is above ``len(MIGRATIONS)`` is refused at
open (``SchemaTooNew``). Each step is a list of statements (run without ``executescript``, which would commit
half-way) or a function of the plain sqlite3 connection for data migrations (migrations run synchronously on
aiosqlite's thread while the Store opens; see db.py).
"""
from __future__ import annotations

from .db import APPLICATION_ID, Migration

_V1_SESSIONS = [
    # One row per conversation. Only one 'current' (active or suspended) session per key: the partial unique
    # index makes a second one impossible even if two processes race in get_or_create.
    """CREATE TABLE sessions (
        session_id  TEXT PRIMARY KEY,
        session_key TEXT NOT NULL,
        state       TEXT NOT NULL CHECK (state IN ('active', 'suspended', 'reset', 'closed')),
        created_at  REAL NOT NULL,
        updated_at  REAL NOT NULL,
        title       TEXT,
        source      BLOB NOT NULL
    )""",
    "CREATE UNIQUE INDEX sessions_one_current_per_key ON sessions (session_key) "
    "WHERE state IN ('active', 'suspended')",
    "CREATE INDEX sessions_by_key ON sessions (session_key, created_at)",
    "CREATE INDEX sessions_by_updated ON sessions (updated_at)",

    # The facts, append-only. event_id is the rowid shared with the search index; seq orders events per session.
    """CREATE TABLE transcript (
        event_id    INTEGER PRIMARY KEY,
        session_id  TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        seq         INTEGER NOT NULL,
        turn_id     TEXT,
        role        TEXT NOT NULL,
        kind        TEXT NOT NULL,
        created_at  REAL NOT NULL,
        payload     BLOB NOT NULL,
        UNIQUE (session_id, seq)
    )""",
    """CREATE TRIGGER transcript_append_only BEFORE UPDATE ON transcript
       BEGIN SELECT RAISE(ABORT, 'transcript is append-only'); END""",
    # Derived: rebuilt from transcript at will (search_index.rebuild). rowid = transcript.event_id.
    "CREATE VIRTUAL TABLE transcript_fts USING fts5 (body, tokenize = 'unicode61 remove_diacritics 2')",
    """CREATE TRIGGER transcript_fts_follow_delete AFTER DELETE ON transcript
       BEGIN DELETE FROM transcript_fts WHERE rowid = old.event_id; END""",

    """CREATE TABLE session_display (
        session_id  TEXT PRIMARY KEY REFERENCES sessions (session_id) ON DELETE CASCADE,
        data        BLOB NOT NULL
    )""",
    # The exact request sent to the model per turn: kept apart because it is large, differs from the transcript
    # (system prompt, compression, tool schemas) and is only needed to reproduce or debug a turn.
    """CREATE TABLE api_sidecar (
        session_id  TEXT NOT NULL REFERENCES sessions (session_id) ON DELETE CASCADE,
        turn_id     TEXT NOT NULL,
        created_at  REAL NOT NULL,
        request     BLOB NOT NULL,
        PRIMARY KEY (session_id, turn_id)
    )""",
    """CREATE TABLE runtime_state (
        session_id           TEXT PRIMARY KEY REFERENCES sessions (session_id) ON DELETE CASCADE,
        turn_token           TEXT,
        compression_cursor   INTEGER NOT NULL DEFAULT 0,
        resume_pending       INTEGER NOT NULL DEFAULT 0,
        resume_inbox_seq     INTEGER,
        resume_started_at    REAL,
        resume_attempted_seq INTEGER,
        updated_at           REAL NOT NULL
    )""",
]

_V1_INBOX = [
    """CREATE TABLE inbox (
        seq                 INTEGER PRIMARY KEY AUTOINCREMENT,
        session_key         TEXT NOT NULL,
        platform            TEXT NOT NULL,
        platform_message_id TEXT NOT NULL,
        state               TEXT NOT NULL CHECK (state IN ('received', 'taken', 'done', 'dropped')),
        payload             BLOB NOT NULL,
        received_at         REAL NOT NULL,
        updated_at          REAL NOT NULL,
        reason              TEXT,
        UNIQUE (platform, platform_message_id)
    )""",
    "CREATE INDEX inbox_by_key_state ON inbox (session_key, state, seq)",
    "CREATE INDEX inbox_by_state ON inbox (state, updated_at)",
    """CREATE TABLE adapter_offsets (
        adapter_id  TEXT PRIMARY KEY,
        value       BLOB NOT NULL,
        updated_at  REAL NOT NULL
    )""",
]

_V1_LEDGER = [
    """CREATE TABLE obligations (
        obligation_id TEXT PRIMARY KEY,
        session_key   TEXT NOT NULL,
        inbound_ref   TEXT NOT NULL,
        platform      TEXT NOT NULL,
        chat_id       TEXT NOT NULL,
        thread_id     TEXT,
        reply_to      TEXT,
        content       TEXT NOT NULL,
        chunks        BLOB NOT NULL,
        state         TEXT NOT NULL
                      CHECK (state IN ('pending', 'attempting', 'delivered', 'failed', 'abandoned')),
        fence         INTEGER NOT NULL DEFAULT 0,
        attempts      INTEGER NOT NULL DEFAULT 0,
        owner_pid     INTEGER,
        owner_start   REAL,
        owner_host    TEXT,
        last_error    TEXT,
        created_at    REAL NOT NULL,
        updated_at    REAL NOT NULL
    )""",
    "CREATE INDEX obligations_by_state ON obligations (state, platform, created_at)",
    "CREATE INDEX obligations_by_updated ON obligations (updated_at)",
    """CREATE TABLE obligation_parts (
        obligation_id       TEXT NOT NULL REFERENCES obligations (obligation_id) ON DELETE CASCADE,
        part_index          INTEGER NOT NULL CHECK (part_index >= 0),
        platform_message_id TEXT NOT NULL,
        recorded_at         REAL NOT NULL,
        PRIMARY KEY (obligation_id, part_index)
    )""",
]

# A platform's 429 ban per (adapter, chat), kept across restarts (storage/pacing.py); ``until`` is wall-clock.
_V2_PACING = [
    """CREATE TABLE pacing_bans (
        adapter_id  TEXT NOT NULL,
        chat_id     TEXT NOT NULL,
        until       REAL NOT NULL,
        PRIMARY KEY (adapter_id, chat_id)
    ) WITHOUT ROWID""",
]

# The ambiguous send (storage/ledger.py): ``send_intent`` is the part whose send left and whose platform message id
# has not come back yet (NULL: none); ``ambiguous`` says a claim found such an intent unresolved, so a copy of the
# reply that the gateway cannot address may exist in the chat.
_V3_SEND_INTENTS = [
    "ALTER TABLE obligations ADD COLUMN send_intent INTEGER",
    "ALTER TABLE obligations ADD COLUMN ambiguous INTEGER NOT NULL DEFAULT 0",
]

# Who may talk to the agent (storage/access.py, G5): users granted per adapter, and the pairing codes handed out.
_V4_ACCESS = [
    """CREATE TABLE access_grants (
        adapter     TEXT NOT NULL,
        user_id     TEXT NOT NULL,
        granted_at  REAL NOT NULL,
        granted_by  TEXT NOT NULL,
        user_name   TEXT,
        PRIMARY KEY (adapter, user_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE pairing_codes (
        code        TEXT PRIMARY KEY,
        adapter     TEXT NOT NULL,
        user_id     TEXT NOT NULL,
        chat_id     TEXT NOT NULL,
        user_name   TEXT,
        created_at  REAL NOT NULL,
        expires_at  REAL NOT NULL,
        state       TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied'))
    )""",
    "CREATE INDEX pairing_codes_by_sender ON pairing_codes (adapter, user_id, created_at)",
]

# Bounded resume (G8): how many times the interrupted turn of the current input was resumed already.
_V5_RESUME_ATTEMPTS = ["ALTER TABLE runtime_state ADD COLUMN resume_attempts INTEGER NOT NULL DEFAULT 0"]

# What recovery did for each session over its life: turns resumed after a restart, and notices that a message
# could not be answered (status, sessions show, /metrics); and the rows still waiting for a turn, by age, for the
# liveness check (Inbox.late: a partial index, as small as the backlog).
_V6_RECOVERY_COUNTS = ["ALTER TABLE runtime_state ADD COLUMN resumes_total INTEGER NOT NULL DEFAULT 0",
                       "ALTER TABLE runtime_state ADD COLUMN notices_total INTEGER NOT NULL DEFAULT 0",
                       "CREATE INDEX inbox_waiting ON inbox (received_at) WHERE state = 'received'"]

# Reactions users put on the bot's messages, tied to the reply where the ledger knows the message (feedback.py).
_V7_FEEDBACK = ["""CREATE TABLE feedback (
        platform      TEXT NOT NULL,
        chat_id       TEXT NOT NULL,
        message_id    TEXT NOT NULL,
        user_id       TEXT NOT NULL,
        emoji         BLOB NOT NULL,
        obligation_id TEXT,
        session_key   TEXT,
        at            REAL NOT NULL,
        PRIMARY KEY (platform, chat_id, message_id, user_id)
    )""", "CREATE INDEX feedback_by_session ON feedback (session_key, at)",
    "CREATE INDEX obligation_parts_by_message ON obligation_parts (platform_message_id)"]

# Scheduled jobs (storage/cron.py): per [cron.NAME] job how far its schedule has been looked at and whether the
# operator paused it; per run its claim, made in the transaction that puts its prompt in the inbox, so a time of the
# schedule is claimed at most once (UNIQUE), whatever restarts come between.
_V8_CRON = [
    """CREATE TABLE cron_jobs (
        job           TEXT PRIMARY KEY,
        checked_until REAL NOT NULL,
        paused        INTEGER NOT NULL DEFAULT 0,
        paused_at     REAL,
        updated_at    REAL NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE cron_runs (
        run_id        TEXT PRIMARY KEY,
        job           TEXT NOT NULL,
        origin        TEXT NOT NULL CHECK (origin IN ('schedule', 'manual')),
        scheduled_at  REAL NOT NULL,
        outcome       TEXT NOT NULL CHECK (outcome IN ('injected', 'skipped')),
        caught_up     INTEGER NOT NULL DEFAULT 0,
        missed        INTEGER NOT NULL DEFAULT 0,
        reason        TEXT,
        session_key   TEXT,
        inbox_seq     INTEGER,
        claimed_at    REAL NOT NULL,
        UNIQUE (job, origin, scheduled_at)
    )""",
    "CREATE INDEX cron_runs_by_job ON cron_runs (job, claimed_at)",
]

# What a profile remembers (storage/memory.py): entries per (profile, scope), written by its remember / forget tools
# and the admin CLI. The same text twice in one scope is one entry (a remember repeated after a crash adds nothing).
_V9_MEMORY = [
    """CREATE TABLE memory (
        memory_id   INTEGER PRIMARY KEY AUTOINCREMENT,
        profile     TEXT NOT NULL,
        scope       TEXT NOT NULL,
        text        TEXT NOT NULL,
        created_at  REAL NOT NULL,
        session_key TEXT,
        UNIQUE (profile, scope, text)
    )""",
    "CREATE INDEX memory_by_scope ON memory (profile, scope, memory_id)",
]

# The search index is brought up to date in batches (storage/search_index.py): each new transcript event is marked
# pending in its own append's transaction, whoever appends it; a deleted event takes its mark along. Every event of
# an earlier version was indexed as it was appended, so none is pending.
_V10_SEARCH_PENDING = [
    "CREATE TABLE search_pending (event_id INTEGER PRIMARY KEY)",
    """CREATE TRIGGER transcript_marked_for_search AFTER INSERT ON transcript
       BEGIN INSERT INTO search_pending (event_id) VALUES (new.event_id); END""",
    """CREATE TRIGGER search_pending_follow_delete AFTER DELETE ON transcript
       BEGIN DELETE FROM search_pending WHERE event_id = old.event_id; END""",
]

# Tool calls waiting for a person's yes (storage/approvals.py, docs/approvals.md): one row per guarded call, its
# state moved by compare-and-set only. A call is asked about once (UNIQUE per session, turn and call id); a typed
# answer's code names one pending row of its session (the partial unique index); the deadline index serves the
# expiry of pending rows, the state index the retention of done ones.
_V11_APPROVALS = [
    """CREATE TABLE approvals (
        approval_id      TEXT PRIMARY KEY,
        code             TEXT NOT NULL,
        session_key      TEXT NOT NULL,
        turn_id          TEXT NOT NULL,
        call_id          TEXT NOT NULL,
        tool_name        TEXT NOT NULL,
        arguments        TEXT NOT NULL,
        arguments_sha256 TEXT NOT NULL,
        platform         TEXT NOT NULL,
        chat_id          TEXT NOT NULL,
        approvers        TEXT NOT NULL CHECK (approvers IN ('chat', 'operator')),
        asked_at         REAL NOT NULL,
        deadline         REAL NOT NULL,
        state            TEXT NOT NULL
                         CHECK (state IN ('pending', 'approved', 'denied', 'expired', 'executing', 'done')),
        answer           TEXT CHECK (answer IN ('approve', 'deny')),
        answered_by      TEXT,
        answered_at      REAL,
        outcome          TEXT CHECK (outcome IN ('ok', 'failed', 'cut', 'denied', 'expired', 'withdrawn')),
        finished_at      REAL,
        step             TEXT NOT NULL DEFAULT '',
        UNIQUE (session_key, turn_id, call_id)
    )""",
    "CREATE UNIQUE INDEX approvals_pending_code ON approvals (session_key, code) WHERE state = 'pending'",
    "CREATE INDEX approvals_pending_by_deadline ON approvals (deadline) WHERE state = 'pending'",
    "CREATE INDEX approvals_by_state ON approvals (state, finished_at)",
]

# What the platform later reported of each part it accepted (WhatsApp's status callbacks: sent, delivered, read,
# failed), kept on the part (storage/ledger.py record_receipt): a reply sent but never received is visible as such.
_V12_PART_RECEIPTS = ["ALTER TABLE obligation_parts ADD COLUMN receipt TEXT"]

# A receipt that named a message before the send's id was recorded (storage/receipts.py): kept, per platform (an
# adapter's name) and message id, until the id is recorded (``Ledger.record_part`` applies it) or ``expires_at``
# passes; the index serves the bounds (expired ones, and the oldest beyond the count per platform).
_V13_PENDING_RECEIPTS = [
    """CREATE TABLE pending_receipts (
        platform            TEXT NOT NULL,
        platform_message_id TEXT NOT NULL,
        receipt             TEXT NOT NULL CHECK (receipt IN ('sent', 'delivered', 'read', 'failed')),
        reason              TEXT NOT NULL DEFAULT '',
        expires_at          REAL NOT NULL,
        PRIMARY KEY (platform, platform_message_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX pending_receipts_by_expiry ON pending_receipts (platform, expires_at)",
]

# The parts of a reply sent as it was written, where the platform has no edits (profile stream_without_edits =
# "paragraphs": actors/sessions/paragraph_parts.py): what each shows, so a reply resumed after a crash knows what the
# chat already has. NULL: none sent so.
_V14_STREAMED_PARTS = ["ALTER TABLE obligations ADD COLUMN streamed BLOB"]

# Background tasks (storage/tasks.py, docs/background.md): one row per task, numbered per chat; its state moves once,
# from started, by compare-and-set. The index serves the count of a chat's running tasks (the per-chat limit);
# ``origin_ref`` (the message that asked for it) is unique, so a message handled again after a crash starts nothing.
_V15_TASKS = [
    """CREATE TABLE tasks (
        origin_key        TEXT NOT NULL,
        number            INTEGER NOT NULL,
        origin_session_id TEXT NOT NULL,
        task_key          TEXT NOT NULL UNIQUE,
        profile           TEXT NOT NULL,
        prompt            TEXT NOT NULL,
        state             TEXT NOT NULL CHECK (state IN ('started', 'done', 'failed', 'cancelled', 'kept')),
        cancel_requested  INTEGER NOT NULL DEFAULT 0,
        result            TEXT,
        delivered         TEXT,
        delivered_files   BLOB,
        inbox_seq         INTEGER,
        started_at        REAL NOT NULL,
        finished_at       REAL,
        origin_ref        TEXT NOT NULL UNIQUE,
        PRIMARY KEY (origin_key, number)
    )""",
    "CREATE INDEX tasks_by_state ON tasks (origin_key, state)",
    "CREATE INDEX tasks_by_start ON tasks (started_at)",
]

# Watches (storage/watches.py, docs/background.md): per [watch.NAME] what it last saw and how many changes it
# claimed; per change its claim, made in the transaction that moves the state and puts the prompt in the inbox, so a
# change is claimed at most once (the state's compare-and-set, and UNIQUE (watch, number)).
_V16_WATCHES = [
    """CREATE TABLE watch_state (
        watch         TEXT PRIMARY KEY,
        target        TEXT NOT NULL,
        content_hash  TEXT NOT NULL,
        content       BLOB NOT NULL,
        changes       INTEGER NOT NULL DEFAULT 0,
        checked_at    REAL NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE watch_changes (
        watch         TEXT NOT NULL,
        number        INTEGER NOT NULL,
        old_hash      TEXT NOT NULL,
        new_hash      TEXT NOT NULL,
        outcome       TEXT NOT NULL CHECK (outcome IN ('injected', 'skipped')),
        reason        TEXT,
        session_key   TEXT,
        inbox_seq     INTEGER,
        claimed_at    REAL NOT NULL,
        PRIMARY KEY (watch, number)
    )""",
]

# v17: leases with fencing tokens (storage/leases.py): which host holds a platform connection's intake or a partition
# of the sessions when hosts share one database. The fence (who may write, under which token) is a table of its own,
# written only when a lease changes hands, so the renewals of every second never touch what every write reads.
# Runtime state: `storage migrate` does not copy it.
_V17_LEASES = [
    """CREATE TABLE leases (
        name          TEXT PRIMARY KEY,
        holder        TEXT NOT NULL,
        life          TEXT NOT NULL,
        token         INTEGER NOT NULL,
        expires_at    REAL NOT NULL,
        taken_at      REAL NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE lease_fences (
        name          TEXT PRIMARY KEY,
        life          TEXT NOT NULL,
        token         INTEGER NOT NULL
    ) WITHOUT ROWID""",
]

# v18: watches the agent created (storage/agent_watches.py, docs/background.md): one row per watch, numbered per
# chat, with the chat's conversation key and source (where a change's prompt goes), what it reads (a URL, a file under
# the operator's roots, or an MCP server's resource) and when (every interval_s, or at the times of a cron schedule).
# ``origin_ref`` (the tool call that created it) is unique, so a call made again in a turn resumed after a crash
# creates nothing. What a watch saw and its changes are in watch_state and watch_changes, under the watch's ``name``.
_V18_AGENT_WATCHES = [
    """CREATE TABLE agent_watches (
        name          TEXT PRIMARY KEY,
        session_key   TEXT NOT NULL,
        number        INTEGER NOT NULL,
        kind          TEXT NOT NULL CHECK (kind IN ('url', 'mcp', 'file')),
        server        TEXT NOT NULL,
        target        TEXT NOT NULL,
        interval_s    REAL NOT NULL,
        schedule      TEXT NOT NULL,
        timezone      TEXT NOT NULL,
        prompt        TEXT NOT NULL,
        source        BLOB NOT NULL,
        origin_ref    TEXT NOT NULL UNIQUE,
        created_at    REAL NOT NULL,
        UNIQUE (session_key, number)
    )""",
]

MIGRATIONS: list[Migration] = [
    [f"PRAGMA application_id = {APPLICATION_ID}", *_V1_SESSIONS, *_V1_INBOX, *_V1_LEDGER],
    _V2_PACING,
    _V3_SEND_INTENTS,
    _V4_ACCESS,
    _V5_RESUME_ATTEMPTS,
    _V6_RECOVERY_COUNTS,
    _V7_FEEDBACK,
    _V8_CRON,
    _V9_MEMORY,
    _V10_SEARCH_PENDING,
    _V11_APPROVALS,
    _V12_PART_RECEIPTS,
    _V13_PENDING_RECEIPTS,
    _V14_STREAMED_PARTS,
    _V15_TASKS,
    _V16_WATCHES,
    _V17_LEASES,
    _V18_AGENT_WATCHES,
]

SCHEMA_VERSION = len(MIGRATIONS)
