"""The console's overview judges health as `status` does (one function: actors/console/health.py). Pure."""
from __future__ import annotations

import pytest

from actors.console.views import status_view
from actors.messages import GatewayStatus
from daemon.status_view import health_of

pytestmark = pytest.mark.timeout(30)


def answer(**detail):
    return GatewayStatus(started_at=0.0, actors_up=5, actors_restarting=0, actors_failed=0, sessions_live=0,
                         obligations_pending=0, draining=False, detail=detail)


@pytest.mark.parametrize("detail", [
    {"models": [{"name": "gpt", "state": "failing", "failed_turns": 2, "error": "HTTP 500"}]},
    {"hosts": [{"name": "w2", "state": "lost"}]},
    {"adapters": [{"name": "tg", "kind": "T", "state": "retrying", "error": "getMe: network error"}]},
    {"voice": {"problems": ["no speech endpoint answers"]}},
])
def test_the_overview_and_status_say_the_same_health_and_reasons(detail):
    view = status_view(answer(**detail), now=10.0)
    assert (view["health"], view["reasons"]) == health_of(answer(**detail))
    assert view["health"] == "degraded" and view["reasons"], view
