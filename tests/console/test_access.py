"""Who may see the console and who may act through it, against the real daemon: the login off loopback, the Host
check on loopback, CSRF-proof writes, read-only by default (actors/console/access.py)."""
from __future__ import annotations

import asyncio
import io
import json

import aiohttp
import pytest
from PIL import Image

from common.config import ConfigError, validate
from storage.media import MediaCache
from actors.console.server import ACTIONS, PAGES, READS
from tests.console.helpers import console_gateway, console_port, running

pytestmark = pytest.mark.timeout(120)

TOKEN = "console-test-token-0123456789"
ARGS = {"search": "?q=hello", "transcript": "?session=nobody"}   # the reads that need an argument
API = [f"/api/{read}{ARGS.get(read, '')}" for read in READS] + ["/api/session", "/api/stream?topic=tree",
                                                                 "/api/media/" + "0" * 64]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def request(method: str, url: str, *, cookies: dict | None = None, headers: dict | None = None,
                  body: bytes | None = None) -> tuple[int, dict, str]:
    async with aiohttp.ClientSession(cookies=cookies or {}) as session:
        async with session.request(method, url, headers=headers or {}, data=body, allow_redirects=False) as response:
            kind = response.headers.get("Content-Type", "")
            text = await response.text() if kind.startswith(("text/", "application/json")) else ""
            return response.status, dict(response.headers), text


@pytest.fixture(scope="module")
def off_loopback(tmp_path_factory):
    """A console on every interface with a login token, actions allowed: only the token opens it."""
    gw = console_gateway(tmp_path_factory.mktemp("console-login"), host="0.0.0.0", login_token=TOKEN,
                         allow_actions=True)
    with running(gw):
        yield gw, console_port(gw)


@pytest.fixture(scope="module")
def loopback_read_only(tmp_path_factory):
    """The defaults but the port: loopback, no token, read-only."""
    gw = console_gateway(tmp_path_factory.mktemp("console-loopback"))
    with running(gw):
        yield gw, console_port(gw)


def test_off_loopback_without_a_login_token_the_configuration_is_refused():
    with pytest.raises(ConfigError, match="login_token"):
        validate({"console": {"host": "0.0.0.0"}}, "gateway.toml")
    validate({"console": {"host": "0.0.0.0", "login_token": TOKEN}}, "gateway.toml")
    validate({"console": {"host": "0.0.0.0", "enabled": False}}, "gateway.toml")   # off: nothing is served


def test_without_the_token_every_page_and_api_route_answers_401(off_loopback):
    _gw, port = off_loopback
    base = f"http://127.0.0.1:{port}"
    for path in [*PAGES, "/chats/abc", *API]:
        status, _headers, _text = run(request("GET", base + path))
        assert status == 401, f"{path} answered {status} without the login"
        status, _headers, _text = run(request("GET", base + path, cookies={"gw_console": "forged"}))
        assert status == 401, f"{path} answered {status} to a forged login cookie"
    for action in ACTIONS:
        status, _headers, _text = run(request("POST", f"{base}/api/actions/{action}", body=b"{}",
                                              headers={"Content-Type": "application/json"}))
        assert status == 401, f"action {action} answered {status} without the login"
    status, _headers, _text = run(request("GET", base + "/static/console.js"))
    assert status == 200   # the script holds no data


def test_the_login_link_sets_an_httponly_strict_cookie_that_opens_every_route(off_loopback):
    gw, port = off_loopback
    base = f"http://127.0.0.1:{port}"
    status, _headers, _text = run(request("GET", base + "/tree?token=wrong"))
    assert status == 401
    status, headers, _text = run(request("GET", base + "/tree?token=" + TOKEN))
    assert status == 303 and headers["Location"] == "/tree"
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
    assert "Secure" not in cookie   # plain HTTP here
    value = cookie.split(";")[0].split("=", 1)[1]
    for path in [*PAGES, *[p for p in API if "stream" not in p]]:
        status, _headers, text = run(request("GET", base + path, cookies={"gw_console": value}))
        wanted = 404 if path.startswith(("/api/transcript?", "/api/media/")) else 200   # the read ran: no such one
        assert status == wanted, f"{path} answered {status} with the login: {text[:200]}"
    tree = json.loads(run(request("GET", base + "/api/tree", cookies={"gw_console": value}))[2])
    assert tree["root"]["kind"] == "Root" and any(c["name"] == "console" for c in tree["root"]["children"])
    # A TLS-terminating proxy on this host says so: the cookie is Secure.
    _status, headers, _text = run(request("GET", base + "/?token=" + TOKEN, headers={"X-Forwarded-Proto": "https"}))
    assert "Secure" in headers["Set-Cookie"]


def _logged_in(port: int) -> tuple[dict, str]:
    base = f"http://127.0.0.1:{port}"
    _status, headers, _text = run(request("GET", base + "/?token=" + TOKEN))
    cookies = {"gw_console": headers["Set-Cookie"].split(";")[0].split("=", 1)[1]}
    csrf = json.loads(run(request("GET", base + "/api/session", cookies=cookies))[2])["csrf"]
    return cookies, csrf


def test_a_write_without_the_csrf_token_or_from_another_site_is_refused(off_loopback):
    gw, port = off_loopback
    base = f"http://127.0.0.1:{port}"
    cookies, csrf = _logged_in(port)
    url = f"{base}/api/actions/deliveries.retry"
    body = b'{"id": "no-such-delivery"}'
    json_type = {"Content-Type": "application/json"}
    status, _h, text = run(request("POST", url, cookies=cookies, headers=json_type, body=body))
    assert status == 403 and "CSRF" in text
    status, _h, text = run(request("POST", url, cookies=cookies, body=body,
                                   headers={**json_type, "X-Console-CSRF": "0" * 64}))
    assert status == 403 and "CSRF" in text
    status, _h, text = run(request("POST", url, cookies=cookies, body=body,
                                   headers={**json_type, "X-Console-CSRF": csrf, "Origin": "https://evil.example"}))
    assert status == 403 and "another site" in text
    # With the token the action runs: the delivery does not exist, and the answer says so.
    status, _h, text = run(request("POST", url, cookies=cookies, body=body,
                                   headers={**json_type, "X-Console-CSRF": csrf, "Origin": f"http://127.0.0.1:{port}"}))
    assert status == 404 and "no-such-delivery" in text, text
    log = gw.wait_log("console: deliveries.retry 'no-such-delivery' by console (login from 127.0.0.1)")
    assert "refused action 'deliveries.retry'" in log


def test_read_only_by_default_every_action_is_refused(loopback_read_only):
    gw, port = loopback_read_only
    base = f"http://127.0.0.1:{port}"
    session = json.loads(run(request("GET", base + "/api/session"))[2])
    assert session["allow_actions"] is False
    for action in ACTIONS:
        status, _h, text = run(request("POST", f"{base}/api/actions/{action}", body=b'{"id": "x", "code": "x"}',
                                       headers={"Content-Type": "application/json",
                                                "X-Console-CSRF": session["csrf"]}))
        assert status == 403 and "read-only" in text, f"{action}: {status} {text}"


def test_on_loopback_a_foreign_host_name_is_refused(loopback_read_only):
    """DNS rebinding: another site's page, its name resolved to 127.0.0.1, carries that name in Host."""
    _gw, port = loopback_read_only
    base = f"http://127.0.0.1:{port}"
    assert run(request("GET", base + "/api/tree"))[0] == 200
    for path in ["/", "/api/tree", "/api/session"]:
        status, _h, _t = run(request("GET", base + path, headers={"Host": "evil.example"}))
        assert status == 421, path
    assert run(request("GET", base + "/api/tree", headers={"Host": f"localhost:{port}"}))[0] == 200


def test_a_body_over_the_bound_is_refused_unread(off_loopback):
    _gw, port = off_loopback
    cookies, csrf = _logged_in(port)
    status, _h, _t = run(request("POST", f"http://127.0.0.1:{port}/api/actions/pairing.approve", cookies=cookies,
                                 body=b"x" * (64 * 1024), headers={"Content-Type": "application/json",
                                                                  "X-Console-CSRF": csrf}))
    assert status == 413


def test_a_transcripts_file_is_served_so_that_it_cannot_run_in_the_page(loopback_read_only):
    gw, port = loopback_read_only
    base = f"http://127.0.0.1:{port}/api/media/"
    cache = MediaCache(gw.state / "media")
    picture = io.BytesIO()
    Image.new("RGB", (4, 3), (200, 30, 30)).save(picture, "PNG")
    png = cache.put(picture.getvalue())
    page = cache.put(b"<html><script>alert(1)</script></html>")
    status, headers, _text = run(request("GET", base + png))
    assert status == 200 and headers["Content-Type"] == "image/png"
    assert "sandbox" in headers["Content-Security-Policy"] and headers["X-Content-Type-Options"] == "nosniff"
    status, headers, _text = run(request("GET", base + page))
    assert status == 200 and headers["Content-Type"] == "application/octet-stream"
    assert headers["Content-Disposition"].startswith("attachment")
    for key in ("0" * 64, "..%2F..%2Fgateway.db", "abc"):
        assert run(request("GET", base + key))[0] == 404, key
