"""``run_gateway.py report`` against the real daemon (one gateway for the module, the fake platform): the archive of
a gateway with a failed delivery and a crashed session cell holds both (the crash with its traceback, the delivery
with its error, in the session's timeline too), holds no configured secret anywhere, and no chat text unless
--include-text; a stopped gateway's report is made from its state dir."""
from __future__ import annotations

import json
import tarfile
import zipfile

import pytest

from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import crash_cell, pipeline_gateway, settled_answers

pytestmark = pytest.mark.timeout(180)
SECRETS = ("sk-report0123456789abcdefghij", "bearer-token-for-the-report-test", "hmac-secret-for-the-report",
           "plugin-webhook-token-0246813579")
USER_TEXT = "Zebra-crossing-remark-71"          # what the chat users wrote; never in a report without --include-text


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path_factory.mktemp("gw"), platform, extra=f"""
[agent]
chunk_delay_s = 0.0
api_key = "{SECRETS[0]}"

[adapters.api]
type = "http"
port = 0
api_tokens = ["{SECRETS[1]}"]
hmac_secret = "{SECRETS[2]}"

[plugins.recorder]
module = "tests.integration.hook_plugins:Rewriter"
webhook_token = "{SECRETS[3]}"
""", agent="")
        gw.start()
        gw.wait_ready()
        try:
            yield gw, platform
        finally:
            gw.cli("stop")
            gw.kill_everything()


def members(path) -> dict:
    if str(path).endswith(".zip"):
        with zipfile.ZipFile(path) as archive:
            return {n.split("/", 1)[1]: archive.read(n).decode() for n in archive.namelist()}
    with tarfile.open(path) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read().decode() for m in tar.getmembers()}


def report(gw, path, *more) -> dict:
    done = gw.cli("report", "-o", str(path), "--json", *more, timeout=120)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return json.loads(done.stdout)


def assert_clean(parts: dict, text_allowed: bool = False) -> None:
    for name, text in parts.items():
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} in {name}"
        if not text_allowed:
            assert USER_TEXT not in text, f"chat text in {name}"


@pytest.fixture(scope="module")
def troubled(rig):
    """A reply that could not be delivered, and a session cell that crashed."""
    gw, platform = rig
    platform.inject("fine", f"hello {USER_TEXT}")
    settled_answers(platform, "fine", 1, 60, gw)
    platform.configure(text_limit=1)     # every send refused for good (400 too_long): given up at once
    platform.inject("doomed", f"this one fails {USER_TEXT}")

    def failed():
        out = gw.cli("deliveries", "--state", "failed", "--json").stdout
        listed = json.loads(out).get("deliveries", []) if out.strip() else []
        return listed or None
    [delivery] = wait_for(failed, 90, 0.3, "a failed delivery")
    platform.configure(text_limit=4000)
    crash_cell(gw, "Session")
    gw.wait_log("crashed on", 30)
    return delivery


def test_the_report_holds_the_failed_delivery_and_the_crash_and_no_secret_or_chat_text(rig, troubled, tmp_path):
    gw, _platform = rig
    answer = report(gw, tmp_path / "bug.tar.gz", "--session", troubled["session_key"])
    parts = members(tmp_path / "bug.tar.gz")
    assert set(answer["members"]) == set(parts) >= {"versions.json", "config.toml", "live.json", "storage.json",
                                                    "crashes.txt", "restarts.txt", "log-tail.txt", "timeline.json",
                                                    "manifest.json", "plugins.json"}
    assert_clean(parts)
    assert "crashed on" in parts["crashes.txt"] and "Traceback (most recent call last)" in parts["crashes.txt"]
    storage = json.loads(parts["storage.json"])
    assert storage["counts"]["ledger"]["failed"] >= 1, storage["counts"]
    [failed] = [o for o in storage["oldest_open"]["ledger"] if o["state"] == "failed"]
    assert failed["last_error"] and failed["text_chars"] > 0 and "text" not in failed
    timeline = json.loads(parts["timeline.json"])["entries"]
    whats = [e["what"] for e in timeline]
    assert {"inbox received", "turn input: user message", "turn answer", "obligation recorded",
            "obligation failed"} <= set(whats), whats
    assert [e["at"] for e in timeline] == sorted(e["at"] for e in timeline)
    live = json.loads(parts["live.json"])
    assert live["running"] and live["tree"] and live["status"]
    assert "[redacted]" in parts["config.toml"] and "recorder" in parts["plugins.json"]


def test_include_text_keeps_the_chat_text_but_still_no_secret_and_a_zip_on_request(rig, troubled, tmp_path):
    gw, _platform = rig
    report(gw, tmp_path / "bug.zip", "--session", troubled["session_key"], "--include-text")
    parts = members(tmp_path / "bug.zip")
    assert_clean(parts, text_allowed=True)
    assert USER_TEXT in parts["timeline.json"]


def test_a_stopped_gateway_is_reported_from_its_state_dir(rig, troubled, tmp_path):
    gw, _platform = rig
    gw.cli("stop", check=True)
    answer = report(gw, tmp_path / "stopped.tar.gz")
    parts = members(tmp_path / "stopped.tar.gz")
    assert_clean(parts)
    assert not json.loads(parts["live.json"])["running"]
    assert any("not running" in note for note in answer["notes"])
    assert "Traceback (most recent call last)" in parts["crashes.txt"]
    # The reply that had failed may have gone out since (a sweep, the stop's flush): failed or delivered by now.
    counts = json.loads(parts["storage.json"])["counts"]
    assert counts["ledger"]["delivered"] + counts["ledger"]["failed"] >= 2 and counts["inbox"]["done"] >= 2, counts
    assert "reply not delivered" in parts["restarts.txt"] + parts["log-tail.txt"]
