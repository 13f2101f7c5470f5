"""What a reload takes from the file and what it leaves for a restart (actors/config_reload.py), without a daemon."""
from __future__ import annotations

import pytest

from actors.config_reload import merge, reload_from_file
from common.config import ConfigError, load

BASE = """
[adapters.fake]
type = "fake"
base_url = "http://127.0.0.1:9/"

[agent]
kind = "offline"
system_prompt = "Default."

[profiles.alpha]
system_prompt = "Alpha."

[[routes]]
adapter = "fake"
profile = "alpha"
"""


@pytest.fixture
def write(tmp_path, monkeypatch):
    monkeypatch.setenv("GATEWAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = tmp_path / "gateway.toml"

    def to_file(text: str) -> str:
        path.write_text(text)
        return str(path)
    return to_file


def test_profiles_routes_and_profile_defaults_change_the_rest_waits_for_a_restart(write):
    running = load(write(BASE))
    fresh = load(write(BASE.replace('"Alpha."', '"Alpha, again."') + """
[sessions]
busy_mode = "interrupt"
shards = 7

[gateway]
admin_port = 4242
"""))
    planned = merge(running, fresh)
    assert planned.changed == ("[profiles.alpha]", "[sessions] busy_mode")
    assert planned.needs_restart == ("[gateway] admin_port", "[sessions] shards")
    config = planned.config
    assert config["profiles"]["alpha"]["system_prompt"] == "Alpha, again."
    assert config["sessions"]["busy_mode"] == "interrupt"
    assert config["sessions"]["shards"] == running["sessions"]["shards"] and config["gateway"]["admin_port"] == 17811
    assert config["_generation"] == running["_generation"] + 1 == 2
    assert config["_sha256"] == fresh["_sha256"] != running["_sha256"]


def test_an_adapter_added_or_its_token_changed_needs_a_restart(write):
    running = load(write(BASE))
    fresh = load(write(BASE.replace('base_url = "http://127.0.0.1:9/"', 'base_url = "http://127.0.0.1:10/"')
                       + '\n[adapters.web]\ntype = "webchat"\nport = 0\n'))
    planned = merge(running, fresh)
    assert planned.needs_restart == ("[adapters.fake]", "[adapters.web]") and planned.changed == ()
    assert planned.config["adapters"] == running["adapters"]


def test_a_good_file_is_read_again_whole(write):
    running = load(write(BASE))
    write(BASE.replace('profile = "alpha"', 'profile = "beta"') + '\n[profiles.beta]\nsystem_prompt = "Beta."\n')
    planned = reload_from_file(running)
    assert planned.changed == ("[profiles.beta]", "[[routes]]")
    assert planned.config["routes"][0]["profile"] == "beta"


@pytest.mark.parametrize("broken, key, reason", [
    (BASE + "\n[[routes]\n", "(syntax)", ""),
    (BASE.replace('profile = "alpha"', 'profile = "ghost"'), "[[routes]] routes[1] profile", "no profile 'ghost'"),
    (BASE + '\n[profiles.alpha.agent]\ntools = ["shell"]\n', "[profiles.alpha.agent] tools", "unknown tool"),
    (BASE + '\n[cron.c]\nschedule = "61 * * * *"\nprompt = "x"\nadapter = "fake"\nchat = "1"\n',
     "[cron.c] schedule", "not a cron expression"),
    (BASE + '\n[sessions]\nbusy_mode = "sometimes"\n', "[sessions] busy_mode", "must be one of"),
], ids=["syntax", "route-to-a-missing-profile", "unknown-tool", "bad-schedule", "bad-value"])
def test_a_file_that_does_not_check_is_refused_with_its_key(write, broken, key, reason):
    running = load(write(BASE))
    write(broken)
    with pytest.raises(ConfigError) as refused:
        reload_from_file(running)
    assert refused.value.key == key and reason in refused.value.reason


def test_a_route_to_an_adapter_only_a_restart_would_add_is_refused_saying_so(write):
    running = load(write(BASE))
    write(BASE + '\n[adapters.web]\ntype = "webchat"\nport = 0\n\n[[routes]]\nadapter = "web"\nprofile = "alpha"\n')
    with pytest.raises(ConfigError) as refused:
        reload_from_file(running)
    assert "with the settings a reload keeps until a restart: [adapters.web]" in refused.value.reason


def test_a_new_secret_is_refused_an_unchanged_one_is_not(write):
    with_key = (BASE + '\n[profiles.alpha.agent]\nkind = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
                       'model = "m"\napi_key = "sk-old-key-0123456789abcdef"\n')
    running = load(write(with_key))
    write(with_key.replace('"Alpha."', '"Alpha 2."'))
    assert reload_from_file(running).changed == ("[profiles.alpha]",)
    write(with_key.replace("sk-old-key", "sk-new-key"))
    with pytest.raises(ConfigError) as refused:
        reload_from_file(running)
    assert refused.value.key == "[profiles.alpha.agent] api_key" and "restart" in refused.value.reason
    assert "sk-new-key" not in str(refused.value)


def test_a_gateway_on_the_embedded_defaults_has_nothing_to_reload(tmp_path, monkeypatch):
    monkeypatch.setenv("GATEWAY_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))   # no default file there
    monkeypatch.delenv("GATEWAY_CONFIG", raising=False)
    with pytest.raises(ConfigError, match="nothing to reload"):
        reload_from_file(load())
