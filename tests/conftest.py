import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# Property tests are judged on what they find, not on how fast one example runs: CI shares 2 cores with daemons.
from hypothesis import settings  # noqa: E402 - after the project's root is put on sys.path

settings.register_profile("gateway", deadline=None)
settings.load_profile("gateway")
