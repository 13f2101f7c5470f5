import pytest

from actors.adapters.payload_fields import MalformedPayload, a_nonempty_string, a_string, an_object, sent_at


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


@pytest.mark.parametrize("stamp, seconds", [
    ("2023-11-14T22:13:20.123456789Z", 1700000000.123456),   # Google Chat's nanoseconds: cut to microseconds
    ("2023-11-14T22:13:20.1234567Z", 1700000000.123456),     # the Bot Framework's seven digits
    ("2023-11-14T23:13:20+01:00", 1700000000.0),
    (" soon", None), ("2023-11-14T22:13:20Z" + "0" * 30, None), (1700000000, None),
    (None, None),
], ids=["nanoseconds", "seven-digits", "offset", "garbage", "oversized", "number", "missing"])
def test_sent_at_reads_an_rfc_3339_time_or_gives_none(stamp, seconds):
    assert sent_at(stamp) == (pytest.approx(seconds) if seconds is not None else None)
