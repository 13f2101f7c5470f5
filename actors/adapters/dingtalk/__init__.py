"""DingTalk (钉钉): an internal app's robot, by Stream mode or HTTP callbacks (README.md). The registry imports
platform.py only."""
