"""What the gateway warns about as it starts: settings that let it start but will fail its first turns, and
deprecated settings still honoured.

Said twice: by ``start`` on its own stderr (the operator is looking at it) and by the launcher in the log (and on
stderr for ``run``), so a service manager's journal has it too. ``doctor`` makes the same checks, and more.
"""
from __future__ import annotations

import os
from typing import Mapping

from actors.agents.base import missing_api_key


def startup_warnings(config: dict, env: Mapping[str, str] = os.environ) -> list[str]:
    warnings = []
    variable = missing_api_key(config.get("agent") or {}, env)
    if variable:
        warnings.append(f'[agent] kind = "openai" has no API key: ${variable} is not set in the gateway\'s '
                        "environment (and [agent] api_key is empty), so a model service that needs a key will "
                        f"refuse every turn (HTTP 401). Export {variable} before starting the gateway, or set "
                        "[agent] api_key_env to the variable that holds the key.")
    if (config.get("gateway") or {}).get("log_level"):
        level = (config.get("logging") or {}).get("level")
        warnings.append("[gateway] log_level is deprecated: set [logging] level instead"
                        + (f" (it is set, to {level!r}, and wins)" if level else
                           f" (log_level = {config['gateway']['log_level']!r} is still honoured for now)"))
    return warnings
