"""One text limit for every adapter ([gateway] max_text_chars, 16,000 by default): a longer message is answered
with a notice saying so and never becomes a turn; shorter ones are answered as always. The HTTP side (413) is in
tests/http/test_daemon.py, the web chat's error frame in tests/webchat/test_server.py."""
from __future__ import annotations

import pytest

from actors.adapters.intake import too_long_notice
from tests.actor_system import wait_for
from tests.fakes.fakeplatform import FakePlatform
from tests.pipeline.harness import pipeline_gateway, settled_answers
from tests.security.test_sender_limits import inbox_rows_of


def test_the_notice_says_how_long_and_what_the_limit_is():
    assert too_long_notice(20_001, 16_000).startswith("Your message is 20,001 characters long; I take at most 16,000")


@pytest.mark.timeout(120)
def test_a_message_over_the_limit_gets_a_notice_and_no_turn(tmp_path):
    with FakePlatform() as platform:
        gw = pipeline_gateway(tmp_path, platform, gateway_toml="max_text_chars = 40\n")
        try:
            gw.start()
            gw.wait_ready()
            platform.inject("c", "y" * 41)
            last = platform.inject("c", "a short question")
            answers = settled_answers(platform, "c", 2, timeout=60, gw=gw)
            assert answers[0] == too_long_notice(41, 40), answers
            assert 'You said: "a short question"' in answers[1]
            wait_for(lambda: platform.stats()["acked_offset"] > last, 30, 0.1, "both messages acknowledged")
            assert inbox_rows_of(gw, platform, "c") == 1, "only the short message became a turn"
        finally:
            gw.cli("stop")
            gw.kill_everything()


def test_the_limit_is_checked_in_the_configuration():
    from common.config import ConfigError, validate
    with pytest.raises(ConfigError, match="between 1 and 100000"):
        validate({"gateway": {"max_text_chars": 0}}, "gateway.toml")
