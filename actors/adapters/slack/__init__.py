"""The Slack adapter (actors/adapters/slack/README.md): ``adapter`` (the actor), ``api`` (the Web API client), ``socketmode`` (events
over a WebSocket), ``events_http`` (events POSTed by Slack), ``signing`` (request signatures), ``events`` (event ->
MessageEvent), ``mrkdwn`` (escaping)."""
