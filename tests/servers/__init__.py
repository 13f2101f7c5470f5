"""Real servers the tests run on loopback (not fakes): installed by .ci/run, started by the tests."""
