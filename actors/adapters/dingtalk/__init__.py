"""DingTalk (钉钉): an internal app's robot over Stream mode (README.md). The registry imports platform.py only."""
