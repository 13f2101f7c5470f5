"""The adapter kit's contract, checked against every registered platform (actors/adapters/base.py,
intake_styles.py, spec.py): a platform's class is the intake style its registration names, implements every abstract
method, and implements exactly the optional methods its capabilities declare (an edit declared but not implemented
would fail every preview at run time; one implemented but not declared would never be asked)."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from actors.adapters.base import PlatformAdapter
from actors.adapters.intake_styles import MailboxAdapter, PollingAdapter, ServingAdapter, StreamingAdapter
from actors.adapters.registry import REGISTRY

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[3]
STYLES = {"poll": PollingAdapter, "socket": StreamingAdapter, "server": ServingAdapter, "actor": MailboxAdapter}
# capability (or pacing flag) -> the method a platform that has it implements
OPTIONAL_METHODS = {"edit": "edit_message", "delete": "delete_message", "files_out": "send_file",
                    "reactions": "set_reaction", "typing": "send_typing", "files_in": "download_attachment",
                    "finds_lost_copies": "find_lost_copy"}
KIT_PLATFORMS = sorted(REGISTRY)
# Deliberate departures, each with its reason: (type, capability) -> why the method differs from the declaration.
DEPARTURES = {
    ("irc", "delete"): "a line cannot be taken back; a delete is answered ok (changing nothing) so that a consumer "
                       "cleaning up moves on",
    ("whatsapp", "delete"): "the Cloud API cannot take a sent message back; a delete is answered ok (changing "
                            "nothing) so that a consumer cleaning up moves on",
    ("line", "delete"): "LINE cannot take a message back; a delete is answered ok (changing nothing) so that a "
                        "consumer cleaning up moves on",
    ("dingtalk", "delete"): "a reply sent through a session webhook has no key to recall it by (the robot API's "
                            "recall is not built); a delete is answered ok (changing nothing) so that a consumer "
                            "cleaning up moves on",
    ("dingtalk", "edit"): "edits exist only where a table names an AI card template (card_template_id: the table's "
                          "pacing turns supports_edit on); the capability table says what every table has, and a "
                          "table without a template is answered by the contract's rule for an edit",
    ("qq", "delete"): "a reply is recorded by the msg_id + msg_seq pair QQ deduplicates on, not by the id QQ's "
                      "recall needs (a repeat QQ refuses as a duplicate names none); a delete is answered ok "
                      "(changing nothing) so that a consumer cleaning up moves on",
    ("email", "delete"): "a mail once sent is the recipient's; a delete is answered ok (changing nothing) so that a "
                         "consumer cleaning up moves on",
    ("fake", "typing"): "the test platform records typing calls for the base's tests (test_base.py); it declares "
                        "no typing, so no session asks for it",
}


def files_arrive_with_the_request(platform, capability: str) -> bool:
    """A served platform's files come in the request itself (the web chat's upload, the HTTP API's content parts),
    already in the media cache: there is nothing pending to download."""
    return capability == "files_in" and platform.intake == "server"


def actor_class(platform):
    module, _, name = platform.actor.rpartition(".")
    return getattr(importlib.import_module(module), name)


def declared(platform, capability: str) -> bool:
    if capability == "finds_lost_copies":
        return platform.pacing.finds_lost_copies
    # send_file carries voice notes too, download_attachment fetches them: a platform may send or take those alone
    if capability == "files_out":
        return platform.capabilities.files_out or platform.capabilities.voice_out
    if capability == "files_in":
        return platform.capabilities.files_in or platform.capabilities.voice
    return getattr(platform.capabilities, capability)


@pytest.mark.parametrize("type_name", KIT_PLATFORMS)
def test_a_platform_is_its_intake_style_and_implements_the_whole_contract(type_name):
    platform = REGISTRY[type_name]
    cls = actor_class(platform)
    assert issubclass(cls, STYLES[platform.intake]), \
        f"{type_name}: registered with intake {platform.intake!r}, so its class subclasses {STYLES[platform.intake]}"
    assert not cls.__abstractmethods__, f"{type_name}: {cls.__name__} leaves {sorted(cls.__abstractmethods__)} abstract"


@pytest.mark.parametrize("type_name", KIT_PLATFORMS)
def test_a_platform_implements_exactly_what_its_capabilities_declare(type_name):
    platform = REGISTRY[type_name]
    cls = actor_class(platform)
    for capability, method in OPTIONAL_METHODS.items():
        if (type_name, capability) in DEPARTURES or files_arrive_with_the_request(platform, capability):
            continue
        implemented = getattr(cls, method) is not getattr(PlatformAdapter, method)
        assert implemented == declared(platform, capability), (
            f"{type_name}: capability {capability} is {declared(platform, capability)} but {cls.__name__}"
            f".{method} is {'implemented' if implemented else 'the refusing default'}")


def test_an_adapter_missing_a_contract_method_cannot_be_made():
    class NoSilenceBound(PollingAdapter):
        async def fetch(self):
            return [], None

        def normalise(self, raw):
            raise NotImplementedError

        async def send_message(self, op):
            return "1"
    with pytest.raises(TypeError, match="normal_silence_s"):
        NoSilenceBound()


def test_no_adapter_calls_a_private_helper_of_the_base():
    calls = [f"{path.relative_to(ROOT)}:{n}" for path in (ROOT / "actors").rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"self\._say\b|self\._clean\b|self\._post\b", line)]
    assert calls == [], f"private helpers of the base called at {calls}: use say / clean_error / post_to_actor"
