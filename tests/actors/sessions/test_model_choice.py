"""/model: the profile's ``models`` key validated, and what the command answers and records (model_choice.py)."""
from __future__ import annotations

import pytest

from actors.agents.openai_compat import OpenAICompatAgent
from actors.profiles.profiles import Profiles, validate_profiles
from actors.sessions.commands import parse_command
from actors.sessions.model_choice import choice_event, chosen_in, effective_model, model_command
from common.config import ConfigError, validate
from storage.sessions import TranscriptEvent

pytestmark = pytest.mark.timeout(30)
BASE = {"agent": {"kind": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "base", "system_prompt": "B."}}


def profiles(**tables):
    return validate({**BASE, "profiles": tables}, "gw.toml")


def support(models=("small", "large")):
    return validate_profiles(profiles(support={"models": list(models)}))["support"]


def test_the_agents_model_comes_first_and_is_always_allowed():
    assert support().allowed_models() == ("base", "small", "large")
    assert support(("large", "base")).allowed_models() == ("base", "large")
    assert validate_profiles(profiles(plain={}))["plain"].allowed_models() == ("base",)


@pytest.mark.parametrize("models, reason", [
    (["a", "a"], "names a model twice"), ([""], "without spaces"), (["two words"], "without spaces"),
    ([3], "without spaces"), (["x" * 129], "1-128 characters"), ([f"m{i}" for i in range(51)], "at most 50"),
])
def test_bad_model_lists_are_refused_naming_the_key(models, reason):
    with pytest.raises(ConfigError, match=reason) as caught:
        validate_profiles(profiles(support={"models": models}))
    assert "[profiles.support] models" in str(caught.value)


def test_a_model_list_needs_a_model_service():
    with pytest.raises(ConfigError, match="kind 'openai'"):
        validate_profiles(profiles(notes={"models": ["a"], "agent": {"kind": "offline"}}))


def test_model_lists_then_switches_and_refuses_a_name_it_does_not_allow():
    profile = support()
    listed = model_command(profile, None, "")
    assert listed.chosen is None
    assert listed.text == ("Model: base.\nModels:\n- base (current, default)\n- small\n- large\n"
                           "Send /model NAME to switch.")
    switched = model_command(profile, None, "large")
    assert (switched.chosen, switched.text) == ("large", "Switched to large: the next answer uses it.")
    assert "- large (current)" in model_command(profile, "large", "").text
    refused = model_command(profile, "large", "gpt-9")
    assert refused.chosen is None
    assert refused.text.startswith("\u201cgpt-9\u201d is not a model this profile allows.\nModels:\n- base (default)")
    assert "- large (current)" in refused.text
    long = model_command(profile, None, "y" * 5000).text
    assert len(long) < 200 and "\u2026" in long


def test_choosing_the_current_model_again_records_nothing_and_answers_the_same():
    again = model_command(support(), "large", "large")
    assert (again.chosen, again.text) == (None, "Switched to large: the next answer uses it.")


def test_a_choice_the_profile_no_longer_allows_falls_back_to_the_default():
    assert effective_model(support(), "large") == "large"
    assert effective_model(support(("small",)), "large") == "base"
    assert effective_model(support(), None) == "base"


def test_a_profile_with_one_model_says_so():
    one = validate_profiles(profiles(plain={}))["plain"]
    assert model_command(one, None, "").text == "Model: base. This profile offers no other model."


def test_the_choice_event_reads_back():
    event = choice_event("small")
    assert (event["role"], event["kind"]) == ("system", "model")
    assert chosen_in(TranscriptEvent(event["role"], event["kind"], event["payload"])) == "small"
    assert chosen_in(None) is None and chosen_in(TranscriptEvent("system", "model", {"model": 3})) is None


def test_the_session_gets_an_agent_asking_for_the_chosen_model():
    cells = Profiles(profiles(support={"models": ["small", "large"]}))
    assert cells.agent("support", "large").model == "large"
    assert isinstance(cells.agent("support", "large"), OpenAICompatAgent)
    assert cells.agent("support", None).model == "base"
    assert cells.agent("support", "not-allowed").model == "base"
    assert cells.agent("support", "large") is cells.agent("support", "large")


def test_model_is_a_known_command():
    command = parse_command("/model large")
    assert (command.name, command.args, command.known) == ("model", "large", True)
