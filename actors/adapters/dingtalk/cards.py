"""AI cards: the request bodies of a streamed answer and the ids they carry, as pure functions (README.md, *AI cards*).

A reply part on a table with a ``card_template_id`` is one card:

    POST /v1.0/card/instances/createAndDeliver   {cardTemplateId, outTrackId, cardData: {cardParamMap}, userIdType,
                                                  openSpaceId, im{Robot,Group}OpenSpaceModel,
                                                  im{Robot,Group}OpenDeliverModel}
    PUT  /v1.0/card/streaming                    {outTrackId, guid, key, content, isFull, isFinalize, isError}

The ids:

* ``outTrackId`` is the card's own id, chosen by the caller, and the message id the gateway records. It is made from
  the send's ``platform_key`` (idempotency.py) and the chat: a table with a template sends keyed parts (its pacing
  says ``idempotent_send``), whose key names the reply's part in every life of the daemon, so a create repeated after
  a kill -9 names the same card, which the platform refuses to make twice (``already_made``): the adapter takes that
  refusal for the card it made, and the sender edits the card to the wanted text after (idempotency.py).
* ``guid`` names one streaming update with one content: made from the op id with everything the update shows (its
  text, its target, whether it finalizes or marks an error), never a counter, so no update of a later life can be
  mistaken for an earlier one's.
"""
from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from actors.adapters.idempotency import platform_key

CARD_IDS = uuid.UUID("9a3f1c52-6e0b-4d7a-b2c4-8f1e5d0a7c33")      # the namespace outTrackIds are made in
UPDATE_GUIDS = uuid.UUID("c4e2b7a9-1d35-4f86-9b0e-2a7d6c3f5e18")  # the namespace streaming guids are made in
CARD_PREFIX = "gwcard-"   # every outTrackId the gateway makes starts so: an edit of any other id is of no card
USER_ID_TYPE = 1          # userIdType 1: openSpaceId names the user by staff id (userid)


def card_track_id(op) -> str:
    """The ``outTrackId`` of the card a send makes: one reply part in one chat, in every life (module docstring)."""
    return CARD_PREFIX + uuid.uuid5(CARD_IDS, f"{op.chat_id}\n{platform_key(op)}").hex


def is_card(message_id: str) -> bool:
    return message_id.startswith(CARD_PREFIX)


def update_guid(op, finalize: bool, error: bool) -> str:
    """The ``guid`` of one streaming update: the op id with the update's whole content. A keyed send's own key
    names its part, not its text, so the digest is of the op taken without it (with it, only the key would count)."""
    content_key = platform_key(dataclasses.replace(op, idempotency_key=None))
    return str(uuid.uuid5(UPDATE_GUIDS, f"{content_key}\n{int(finalize)}{int(error)}"))


def can_hold_card(chat_id: str, chat_type: str) -> bool:
    """A card goes to a group (its openConversationId) or to a user by staff id; a one-to-one chat whose id is its
    conversation id (a user outside the organisation, no staff id: inbound.chat_of) has no space a card can name."""
    return chat_type == "group" or not chat_id.startswith("cid")


def create_body(template_id: str, track_id: str, chat_id: str, chat_type: str, robot_code: str, content_key: str,
                text: str) -> dict[str, Any]:
    """The body of ``createAndDeliver``: the card made from the template with ``text`` as its content variable and
    delivered into the robot's one-to-one chat with the user (``IM_ROBOT``) or into the group (``IM_GROUP``)."""
    body: dict[str, Any] = {"cardTemplateId": template_id, "outTrackId": track_id, "userIdType": USER_ID_TYPE,
                            "cardData": {"cardParamMap": {content_key: text}}}
    if chat_type == "group":
        body.update(openSpaceId=f"dtv1.card//IM_GROUP.{chat_id}",
                    imGroupOpenSpaceModel={"supportForward": True},
                    imGroupOpenDeliverModel={"robotCode": robot_code})
    else:
        body.update(openSpaceId=f"dtv1.card//IM_ROBOT.{chat_id}",
                    imRobotOpenSpaceModel={"supportForward": True},
                    imRobotOpenDeliverModel={"spaceType": "IM_ROBOT", "robotCode": robot_code})
    return body


def stream_body(track_id: str, guid: str, content_key: str, text: str, finalize: bool, error: bool) -> dict:
    """The body of one ``PUT /v1.0/card/streaming``: the whole content (``isFull``), so an update repeated or
    arriving after a later one never leaves a half text; ``isFinalize`` ends the card's streaming state."""
    return {"outTrackId": track_id, "guid": guid, "key": content_key, "content": text, "isFull": True,
            "isFinalize": finalize, "isError": error}


def delivery_refusal(answer: Any) -> str | None:
    """Why a ``createAndDeliver`` answer says the card was made but not delivered (``result.deliverResults`` with a
    failed space), or None."""
    result = answer.get("result") if isinstance(answer, dict) else None
    deliveries = result.get("deliverResults") if isinstance(result, dict) else None
    for item in deliveries if isinstance(deliveries, list) else ():
        if isinstance(item, dict) and item.get("success") is False:
            return str(item.get("errorMsg") or "the card was not delivered")[:200]
    return None


def already_made(status: int, answer: Any) -> bool:
    """A create refused because a card with this outTrackId exists: what a create repeated after a crash is
    answered (the card is the gateway's own, made by the earlier attempt)."""
    code = str(answer.get("code") or "") if isinstance(answer, dict) else ""
    lowered = code.lower()
    return status in (400, 409) and "outtrackid" in lowered and ("exist" in lowered or "dup" in lowered)
