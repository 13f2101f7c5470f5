import pytest

from actors.adapters.payload_fields import MalformedPayload, a_nonempty_string, a_string, an_object


def test_each_check_returns_a_value_of_the_expected_type():
    assert an_object({"a": 1}, "update") == {"a": 1}
    assert a_string("", "text") == ""
    assert a_nonempty_string("c1", "chat") == "c1"


@pytest.mark.parametrize("check, value, reason", [
    (an_object, [1], "update 7: message is list, not an object"),
    (a_string, 5, "update 7: message must be a string, got int"),
    (a_nonempty_string, "", "update 7: message must be a non-empty string, got ''"),
    (a_nonempty_string, None, "update 7: message must be a non-empty string, got None"),
], ids=["object", "string", "empty", "none"])
def test_a_wrong_value_is_refused_with_the_field_and_what_was_found(check, value, reason):
    with pytest.raises(MalformedPayload) as refused:
        check(value, "update 7: message")
    assert str(refused.value) == reason


def test_intake_refuses_with_the_same_exception_adapters_catch():
    from actors.adapters.intake import MalformedPayload as from_intake
    assert from_intake is MalformedPayload
