"""The generic fake platform of the tests (tests/fakes/fakeplatform.py): a long-poll API with every capability the
pipeline needs, fast, and a documented 4,000-character limit so chunking is exercised."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=True, delete=True, threads=True, reactions=False, files_in=False, files_out=True,
                            voice=False, buttons=False, typing=False)

PLATFORM = Platform(
    type="fake", actor="actors.adapters.fake.adapter.FakePlatformAdapter",
    summary="the test suite's generic long-poll platform", intake="poll", capabilities=CAPABILITIES,
    pacing=paced("fake", CAPABILITIES, 4000, "chars", edit_interval_s=0.05, min_edit_delta_chars=1,
                 per_chat_ops_per_s=50.0, per_chat_burst=50, typing_interval_s=None),
    options={
        "base_url": Option(str, doc="http://host:port of the fake platform (tests/fakes/fakeplatform.py)"),
        "poll_timeout_s": Option(float, 1.0, doc="long-poll wait per round"),
    })
