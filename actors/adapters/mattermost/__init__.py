"""The Mattermost adapter: the WebSocket event stream in, REST v4 out (actors/adapters/mattermost/README.md)."""
