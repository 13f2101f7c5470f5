"""The QQ official bot API (QQ 开放平台 机器人): see README.md beside this file."""
