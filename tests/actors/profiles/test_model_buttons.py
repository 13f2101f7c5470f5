"""actors/profiles/model_buttons.py: /model's listing gets a button per model to switch to (never the current one,
never one whose data would not fit Telegram's 64 bytes), and a button's data reads back as the model it names."""
from __future__ import annotations

import pytest

from actors.profiles.model_buttons import MAX_MODEL_BUTTONS, model_buttons, model_of_button

pytestmark = pytest.mark.timeout(30)

LISTING = ("Model: small-model.\nModels:\n- small-model (current, default)\n- large-model\n- reasoning-model\n"
           "Send /model NAME to switch.")


def test_the_listing_gets_a_button_per_model_but_the_current_one():
    assert model_buttons(LISTING) == (("large-model", "md:large-model"), ("reasoning-model", "md:reasoning-model"))
    assert model_buttons("Models:\n- large-model\nSomething else.") == (), "only /model's listing"
    assert model_buttons("Switched to large-model: the next answer uses it.") == ()
    long_name = "m" * 62
    assert model_buttons(f"Models:\n- {long_name}\n- ok\nSend /model NAME to switch.") == (("ok", "md:ok"),)
    many = "Models:\n" + "".join(f"- m{i}\n" for i in range(30)) + "Send /model NAME to switch."
    assert len(model_buttons(many)) == MAX_MODEL_BUTTONS


def test_a_buttons_data_reads_back_as_its_model_and_nothing_else_does():
    assert model_of_button("md:large-model") == "large-model"
    assert model_of_button("ap:AbCdEfGhIjKl-_78:y") is None and model_of_button("md:") is None
    assert model_of_button("md:two words") is None and model_of_button(None) is None
    assert model_of_button("md:" + "m" * 70) is None
