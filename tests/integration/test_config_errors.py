"""Bad configuration: a clear message naming the file and key, exit 78, nothing started."""
from __future__ import annotations

import pytest

from tests.actor_system import free_port
from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("toml, key, reason", [
    ("[gateway]\nadmin_prot = 1\n", "[gateway] admin_prot", "unknown key"),
    ("[gateway]\nadmin_port = \"abc\"\n", "[gateway] admin_port", "expected an integer"),
    ("[storage]\ndurability = \"sometimes\"\n", "[storage] durability", "must be one of"),
    ("[nonsense]\nx = 1\n", "nonsense", "unknown section"),
    ("[gateway\n", "(syntax)", ""),
])
def test_bad_config_names_the_key_and_exits_78(tmp_path, toml, key, reason):
    gw = Gateway(tmp_path)
    gw.config.write_text(toml)
    result = gw.cli("run", timeout=30)
    assert result.returncode == 78
    assert str(gw.config) in result.stderr and key in result.stderr and reason in result.stderr
    assert not (gw.state / "run" / "gateway.pid").exists()


def test_missing_config_file_exits_78(tmp_path):
    gw = Gateway(tmp_path)
    gw.config.unlink()
    result = gw.cli("start", timeout=30)
    assert result.returncode == 78 and "no such file" in result.stderr


def test_admin_commands_with_nothing_running_say_so_and_start_nothing(tmp_path):
    import socket
    gw = Gateway(tmp_path, admin_port=free_port())
    for command in ("status", "tree", "drain"):
        result = gw.cli(command, timeout=30)
        assert result.returncode == 3 and "no gateway running" in result.stderr
    with socket.socket() as s:  # nothing was started on the admin port
        assert s.connect_ex(("127.0.0.1", gw.port)) != 0


def test_a_bad_adapter_table_is_a_config_error_too(tmp_path):
    gw = Gateway(tmp_path, extra_toml='[adapters.x]\ntype = "fake"\nbase_url = "http://127.0.0.1:9"\nbogus = 1\n')
    result = gw.cli("run", timeout=30)
    assert result.returncode == 78 and "[adapters.x] bogus" in result.stderr and "unknown key" in result.stderr


def test_every_error_of_every_table_is_listed_at_once_with_the_likeliest_key(tmp_path):
    gw = Gateway(tmp_path)
    gw.config.write_text('[gateway]\nadmin_prot = 1\n[adapters.web]\ntype = "webchat"\nprot = 8765\nhost = 5\n'
                         '[adapters.tg]\ntype = "telegram"\n')
    result = gw.cli("start", timeout=30)
    assert result.returncode == 78, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "[gateway] admin_prot: unknown key, did you mean 'admin_port'?" in lines[0], lines
    # The schema's error is found first; once it is fixed, every adapter table's errors come together.
    gw.config.write_text(gw.config.read_text().replace("admin_prot", "admin_port"))
    lines = gw.cli("start", timeout=30).stderr.strip().splitlines()
    assert [line.split(": ", 3)[2] for line in lines[:-1]] == [
        "[adapters.web] prot", "[adapters.web] host", "[adapters.tg] token"], lines
    assert "did you mean 'port'?" in lines[0] and lines[-1] == "(3 errors in the configuration)", lines
    assert not (gw.state / "run" / "gateway.pid").exists()


EVERY_KIND_OF_TABLE = '''
[profiles.helper]
busy_mod = "queue"
descripton = "helps"
[profiles.coder.agent]
modle = "big"
[[routes]]
chat = "1"
profile = "helpr"
[[routes]]
chat = "2"
adaptor = "web"
[cron.morning]
schedule = "0 8 * * *"
prompt = "good morning"
adapter = "wbe"
chat = "1"
profile = "helpr"
[cron.evening]
schedul = "0 20 * * *"
prompt = "good evening"
adapter = "web"
chat = "1"
[plugins.audit]
enabled = "yes"
timeout_s = "2"
'''


def test_every_error_of_profiles_routes_cron_and_plugins_is_listed_at_once_with_the_likeliest_name(tmp_path):
    gw = Gateway(tmp_path, extra_toml=EVERY_KIND_OF_TABLE)
    result = gw.cli("start", timeout=30)
    assert result.returncode == 78, result.stderr
    lines = result.stderr.strip().splitlines()
    keys = [line.split(": ", 3)[2] for line in lines[:-1]]
    assert keys == ["[profiles.helper] busy_mod", "[profiles.helper] descripton", "[profiles.coder.agent] modle",
                    "[[routes]] routes[1] profile", "[[routes]] routes[2] adaptor",
                    "[plugins.audit] enabled", "[plugins.audit] timeout_s",
                    "[cron.evening] schedul", "[cron.evening] schedule",
                    "[cron.morning] adapter", "[cron.morning] profile"], lines
    shown = "\n".join(lines)
    for hint in ("did you mean 'busy_mode'?", "did you mean 'description'?", "did you mean 'model'?",
                 "no profile 'helpr', did you mean 'helper'?", "did you mean 'adapter'?",
                 "did you mean 'schedule'?", "no adapter 'wbe' is configured, did you mean 'web'?"):
        assert hint in shown, (hint, lines)
    assert lines[-1] == f"({len(keys)} errors in the configuration)", lines
