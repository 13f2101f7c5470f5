"""A fake Google Chat for tests, in Google's wire format (from developers.google.com/workspace/chat: "Verify requests
from Google Chat", "Receive and respond to interaction events", the ``spaces.messages`` reference (create, patch,
delete), "Usage limits", and the OAuth 2.0 service account flow of developers.google.com/identity).

In process::

    with FakeGoogleChat(webhook_url="http://127.0.0.1:8092/googlechat/events") as chat:
        delivery = chat.inject_text(chat.dm("alice"), "hello")       # signed, POSTed once
        chat.wait_for(lambda: chat.messages(chat.dm("alice")), timeout=30)

Wire format implemented:

* Events: one ``POST`` of the interaction event (``type``, ``eventTime``, ``space``, ``message`` with ``name``,
  ``sender``, ``createTime``, ``text``, ``argumentText``, ``thread``, ``threadReply``, ``annotations`` of the app's
  @-mention in a space, ``user``) with ``Authorization: Bearer`` a JWT the fake signs (RS256, keys.py): for a
  project-number audience issued by ``chat@system.gserviceaccount.com``, for an endpoint-URL audience a Google ID
  token (issuer ``https://accounts.google.com``, ``email`` the Chat account). A space's message reaches the app only
  with the mention, as in Chat. Google Chat does not send an event again: ``retries`` (default 0) makes the fake do
  so, for tests whose adapter restarts meanwhile.
* ``GET /certs/x509`` (the x509 certificates by kid) and ``GET /certs/jwks``, with ``Cache-Control: max-age``.
* ``POST /token``: the ``jwt-bearer`` grant; the assertion must be signed by the service account's key (its
  ``kid``), issued by its email, for this endpoint, the ``chat.bot`` scope, valid at most an hour; else 400
  ``invalid_grant`` / ``invalid_scope``. Tokens expire after ``token_lifetime``.
* Every Chat API call needs a token the endpoint granted and not expired: else 401 ``UNAUTHENTICATED``.
* ``POST /v1/spaces/{space}/messages?requestId=&messageReplyOption=`` ``{text, thread: {name}}`` -> the Message; a
  ``requestId`` used before in the space returns the message it created and creates nothing. Text 1 to
  ``text_limit`` characters, else 400 ``INVALID_ARGUMENT``. ``REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD`` with a thread
  name puts the message in that thread; without an option a message starts a new thread.
* Cards: a create's ``cardsV2`` (a list of ``{cardId, card: {sections: [{widgets: [{buttonList: {buttons: [{text,
  onClick: {action: {function, parameters: [{key, value}]}}}]}}]}]}}``, enough of the schema checked to refuse a
  malformed one) and ``privateMessageViewer`` (a private message: kept apart, ``private_messages``).
  ``press_button`` posts a signed ``CARD_CLICKED`` event ("Receive and respond to interaction events", "Read form
  data input by users on cards"): ``user`` the presser, ``message`` the app's message, the action as ``common``
  (``invokedFunction``, ``parameters`` a map) and as ``action`` (``actionMethodName``, ``parameters`` a list).
* ``PATCH /v1/spaces/{space}/messages/{id}?updateMask=text[,cardsV2]`` ``{text[, cardsV2]}``; ``DELETE`` of the
  same; 404 ``NOT_FOUND`` for a message the app does not have (or deleted).
* ``GET /v1/spaces/{space}``.
* Files in ("Download media as a file attachment", the ``spaces.messages.attachments`` and ``media.download``
  references): ``inject_file`` posts a message whose ``attachment`` list holds an Attachment of uploaded content
  (``name``, ``contentName``, ``contentType``, ``source`` ``UPLOADED_CONTENT``, ``attachmentDataRef.resourceName``,
  ``thumbnailUri``, ``downloadUri``); ``GET /v1/media/{resourceName}?alt=media`` serves its bytes to a live app
  token (401 otherwise, 404 for an unknown name; without ``alt=media`` the Media resource). ``drive_file`` is an
  Attachment of a Drive file (``driveDataRef``), which the Chat API does not serve.
* Rate limits: a space takes ``space_writes_per_minute`` writes (creates, patches, deletes) in any 60 s; one more
  is 429 ``RESOURCE_EXHAUSTED`` and counts as a ``pace_violation``. A scripted ``flood`` is a 429 (no Retry-After,
  as Google's) that bans the space for ``flood_retry_after``: a write inside it is refused again and counts as a
  ``retry_after_violation``.

Left out: cards other than buttons, dialogs, ``actionResponse`` bodies in an event's answer (the fake reads only the
status), ``media.upload`` (it requires user authentication, which a Chat app's service account is not), reactions,
memberships, user authentication, slash commands, the ``messageId`` custom names, the per-project quotas, and key
rotation (one key at a time).

Control API (JSON): ``GET /_control/stats``, ``POST /_control/inject {"user", "text"}`` (a DM),
``POST /_control/webhook_url {"url"}``.
"""
from tests.fakes.googlechat.keys import event_token, service_account_file
from tests.fakes.googlechat.server import DEFAULT_AUDIENCE, DEFAULT_LIMITS, FakeGoogleChat

__all__ = ["FakeGoogleChat", "DEFAULT_AUDIENCE", "DEFAULT_LIMITS", "event_token", "service_account_file"]
