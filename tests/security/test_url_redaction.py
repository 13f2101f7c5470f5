"""URL-valued options are shown as their scheme and host only, by `config show` and in the report bundle: their
paths and queries (a webhook's secret path, ``?key=``, a proxy's password) are often credentials that no word in the
option's name gives away. The real CLI on a configuration that is not running (the report is made from the state
directory)."""
from __future__ import annotations

import json
import tarfile

import pytest

from tests.gateway import Gateway

pytestmark = pytest.mark.timeout(60)
PATH_SECRETS = ("T0AAAA/B0BBBB/PathSecretXyz123", "QueryKeyAbc987", "ProxyPassword55", "WhisperPath4242")


@pytest.fixture
def gw(tmp_path):
    return Gateway(tmp_path, extra_toml=f"""
[agent]
base_url = "https://llm-user:{PATH_SECRETS[2]}@llm.example.com:8443/v1"
[media]
transcription_url = "https://stt.example.com/{PATH_SECRETS[3]}/v1"
[adapters.api]
type = "http"
port = 0
callback_url = "https://hooks.example.com/services/{PATH_SECRETS[0]}?key={PATH_SECRETS[1]}"
""")


def test_config_show_gives_every_url_as_its_scheme_and_host(gw):
    shown = json.loads(gw.cli("config", "show", "--json", check=True).stdout)["config"]
    assert shown["adapters"]["api"]["callback_url"] == "https://hooks.example.com/[redacted]"
    assert shown["agent"]["base_url"] == "https://llm.example.com:8443/[redacted]"
    assert shown["media"]["transcription_url"] == "https://stt.example.com/[redacted]"
    text = gw.cli("config", "show", check=True).stdout
    assert 'callback_url = "https://hooks.example.com/[redacted]"' in text
    assert not [s for s in PATH_SECRETS if s in text + json.dumps(shown)]


def test_the_report_bundle_holds_no_url_path_of_the_configuration(gw, tmp_path):
    report = tmp_path / "report.tar.gz"
    gw.cli("report", "-o", str(report), check=True)
    with tarfile.open(report) as archive:
        texts = {m.name: archive.extractfile(m).read().decode() for m in archive.getmembers() if m.isfile()}
    config = next(text for name, text in texts.items() if name.endswith("config.toml"))
    assert "https://hooks.example.com/[redacted]" in config and "https://llm.example.com:8443/[redacted]" in config
    leaked = {name: [s for s in PATH_SECRETS if s in text] for name, text in texts.items()}
    assert not any(leaked.values()), leaked
