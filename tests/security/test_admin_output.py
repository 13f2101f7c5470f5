"""No configured secret reaches the inbox or the transcript (a user typed it), a chat in an answer (the offline
agent quotes the message, as a model may repeat a key it saw), or the output of an admin command: a transcript, a delivery or an
error that holds one is shown with ``[redacted]`` in its place, in text and in --json (run_gateway.py wraps the
CLI's stdout and stderr in common.redact.RedactingStream). ``sessions export`` writes the session as stored: it is a backup (0600), and an
import must give back what was exported."""
from __future__ import annotations

import json
import sqlite3
import urllib.parse

import pytest

from storage import records
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import pipeline_gateway, settled_answers

pytestmark = pytest.mark.timeout(180)
SECRET = "sk-proj-Zq8yW3vN5tR7uP1oL4kJ6hG2fD9sA0xCb"   # the agent's configured key
FORMS = (SECRET, urllib.parse.quote(SECRET, safe=""), SECRET[1:])   # as stored, URL-encoded, minus a character
# A key of the user's own, not the gateway's: stored as typed (it is their text), redacted wherever the gateway
# shows text (the answer, the admin commands) by its shape.
SHAPED = "sk-userOwnKey0123456789abcdefghij"


def test_a_secret_is_redacted_in_the_answer_the_stored_answer_and_every_admin_command(tmp_path):
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform, agent=f'[agent]\nchunk_delay_s = 0.0\napi_key = "{SECRET}"\n')
        try:
            gw.start()
            gw.wait_ready()
            platform.inject("leaky", f"my key is {SECRET} and in a link ?k={FORMS[1]}; mine is {SHAPED}")
            [answer] = settled_answers(platform, "leaky", gw=gw)
            history = [h["text"] for m in platform.messages("leaky") for h in m["history"]]
            assert "my key is [redacted]" in answer and not [t for t in history for f in FORMS + (SHAPED,) if f in t]
            with sqlite3.connect(gw.state / "gateway.db") as db:
                answers = [records.unpack(blob)["text"] for (blob,) in
                           db.execute("SELECT payload FROM transcript WHERE role = 'assistant'")]
            assert answers and not [a for a in answers for f in FORMS if f in a], "the stored answer is redacted"
            with sqlite3.connect(gw.state / "gateway.db") as db:
                stored = [blob for (blob,) in db.execute("SELECT payload FROM transcript")] + \
                    [blob for (blob,) in db.execute("SELECT payload FROM inbox")]
            assert stored and not [b for b in stored for f in FORMS if f.encode() in b], \
                "what the user typed is stored without the operator's key, in the inbox and the transcript"
            assert [b for b in stored if SHAPED.encode() in b], "and with the rest of what they typed"
            listing = json.loads(gw.cli("sessions", "list", "--json", check=True).stdout)
            [session] = [s for s in listing["sessions"] if s["session_key"].endswith("leaky")] or \
                listing["sessions"][:1]
            sid = session["session_id"]
            commands = [("status",), ("status", "--json"), ("tree",), ("tree", "--json", "--all"),
                        ("sessions", "list"), ("sessions", "list", "--json"),
                        ("sessions", "show", sid), ("sessions", "show", sid, "--json"),
                        ("sessions", "search", "key"), ("sessions", "search", "key", "--json"),
                        ("deliveries",), ("deliveries", "--json"), ("deliveries", "--state", "delivered", "--json"),
                        ("pair", "list"), ("pair", "list", "--json"),
                        ("sessions", "show", SECRET)]   # an error that echoes what was asked for
            shown = {}
            for command in commands:
                result = gw.cli(*command)
                shown[command] = result.stdout + result.stderr
            for command, text in shown.items():
                for form in FORMS + (SHAPED,):
                    assert form not in text, f"{' '.join(command)} printed the secret ({form[:6]}...):\n{text}"
            assert "[redacted]" in shown[("sessions", "show", sid)], "the stored text is shown, minus the key"
            assert "my key is" in shown[("sessions", "show", sid, "--json")]
            export = tmp_path / "leaky.export"
            gw.cli("sessions", "export", sid, str(export), check=True)
            assert SHAPED.encode() in export.read_bytes(), "the backup is the session as stored"
        finally:
            gw.cli("stop")
            gw.kill_everything()
