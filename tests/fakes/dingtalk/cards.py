"""The fake's AI cards (a mixin of FakeDingTalk): ``createAndDeliver`` and the streaming update, with their checks.

* ``POST /v1.0/card/instances/createAndDeliver`` ``{cardTemplateId, outTrackId, cardData: {cardParamMap},
  userIdType, openSpaceId, …}``: the template must be the fake's ``card_template`` (else 400
  ``invalidParameter.cardTemplate.notFound``); ``openSpaceId`` ``dtv1.card//IM_ROBOT.<userId>`` needs
  ``imRobotOpenDeliverModel {spaceType: "IM_ROBOT", robotCode}``, ``dtv1.card//IM_GROUP.<openConversationId>`` needs
  ``imGroupOpenDeliverModel {robotCode}``. Answer ``{success, result: {outTrackId, deliverResults: [{spaceType,
  spaceId, success, carrierId}]}}``. A second create under an outTrackId that exists makes nothing and is refused:
  HTTP 400 ``param.outTrackIdExists`` (the fake's code: the documentation read names none for it), counted in
  ``card_creates_refused``.
* ``PUT /v1.0/card/streaming`` ``{outTrackId, guid, key, content, isFull, isFinalize, isError}``: the card must
  exist (400 ``card.notFound``), ``key`` be the template's content variable (``card_key``), ``isFull`` true (the
  fake takes whole texts only). A ``guid`` seen before with the same content and flags is answered ok and changes
  nothing (counted in ``card_updates_repeated``); with other content it is refused (400 ``param.guidReused``,
  counted in ``card_guids_reused``: an idempotency key that named two operations).

Both need a live token (``x-acs-dingtalk-access-token``), and both take the scripted faults (methods
``card_create``, ``card_stream``), a flood banning the chat as for the sends. Both count against the app's QPS: a
call that makes more than ``card_qps`` (20, the standard edition's limit per app) card calls of the app within one
second is refused as the platform refuses one past its QPS (HTTP 403 ``Forbidden.AccessDenied.QpsLimitForApi``) and
counted in ``card_qps_violations``. A create's answer can be held (``hold_next_answer("card_create", chat)``: the
delivery case). ``cards(chat)`` shows each card with its content, its history of contents, ``finalized`` and
``error``.
"""
from __future__ import annotations

import time

from aiohttp import web

from tests.fakes.harness import drop_connection, json_object

CARD_METHODS = ("card_create", "card_stream")
DEFAULT_CARD_TEMPLATE = "fake-ai-card-0001.schema"
DEFAULT_CARD_KEY = "content"
QPS_LIMIT = {"code": "Forbidden.AccessDenied.QpsLimitForApi", "message": "api qps limit exceeded"}
ROBOT_SPACE, GROUP_SPACE = "dtv1.card//IM_ROBOT.", "dtv1.card//IM_GROUP."


def refusal(code: str, message: str, status: int = 400) -> web.Response:
    return web.json_response({"code": code, "message": message, "requestid": "fake"}, status=status)


class CardMethods:
    card_template = DEFAULT_CARD_TEMPLATE
    card_key = DEFAULT_CARD_KEY

    def cards(self, chat: str) -> list[dict]:
        """The chat's cards, oldest first: {"id", "content", "history", "finalized", "error", "template"}."""
        return self.read(lambda s: sorted((dict(c, id=i) for i, c in s["cards"].items() if c["chat"] == chat),
                                          key=lambda c: c["at"]))

    def over_card_qps(self, state: dict, chat: str, method: str, now: float):
        """The QPS refusal of a card call that makes more than ``card_qps`` in the app's last second (counted), or
        None. Every call that reaches the platform counts, refused or not."""
        recent = [at for at in state["card_calls"] if at > now - 1.0] + [now]
        state["card_calls"] = recent
        if len(recent) <= self.limits["card_qps"]:
            return None
        state["stats"]["card_qps_violations"] += 1
        self._log_op(state, method, chat, 429)
        return web.json_response(QPS_LIMIT, status=403)

    def add_card_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1.0/card/instances/createAndDeliver", self.create_and_deliver)
        app.router.add_put("/v1.0/card/streaming", self.stream_card)

    def _card_space(self, params: dict):
        """(chat, space type) the create delivers into, or the refusal of one naming none."""
        space = params.get("openSpaceId")
        robot, group = params.get("imRobotOpenDeliverModel"), params.get("imGroupOpenDeliverModel")
        if isinstance(space, str) and space.startswith(ROBOT_SPACE) and len(space) > len(ROBOT_SPACE):
            if not isinstance(robot, dict) or robot.get("spaceType") != "IM_ROBOT" or robot.get(
                    "robotCode") != self.client_id:
                return None, refusal("param.openSpaceModelInvalid", "imRobotOpenDeliverModel")
            return (space[len(ROBOT_SPACE):], "IM_ROBOT"), None
        if isinstance(space, str) and space.startswith(GROUP_SPACE + "cid"):
            if not isinstance(group, dict) or group.get("robotCode") != self.client_id:
                return None, refusal("param.openSpaceModelInvalid", "imGroupOpenDeliverModel")
            return (space[len(GROUP_SPACE):], "IM_GROUP"), None
        return None, refusal("param.openSpaceIdInvalid", "openSpaceId")

    async def create_and_deliver(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return web.json_response({"code": "InvalidAuthentication", "message": "token"}, status=401)
        params, now = await json_object(request), time.time()
        track_id, template = params.get("outTrackId"), params.get("cardTemplateId")
        if not isinstance(track_id, str) or not track_id or len(track_id) > 64:
            return refusal("param.outTrackIdEmpty", "outTrackId")
        if template != self.card_template:
            return refusal("invalidParameter.cardTemplate.notFound", "no such card template")
        where, refused = self._card_space(params)
        if refused is not None:
            return refused
        chat, space_type = where
        card_map = (params.get("cardData") or {}).get("cardParamMap") if isinstance(params.get("cardData"),
                                                                                    dict) else None
        if not isinstance(card_map, dict) or not all(isinstance(v, str) for v in card_map.values()) or \
                params.get("userIdType", 1) != 1:
            return refusal("param.cardPublicDataEmpty", "cardData.cardParamMap of strings, userIdType 1")
        with self.mutate() as state:
            fault, answer = self.faulted(state, "card_create", chat, now, request)
            if answer is None:
                answer = self.over_card_qps(state, chat, "card_create", now)
            if answer is not None:
                return answer
            if track_id in state["cards"]:
                state["stats"]["card_creates_refused"] += 1
                self._log_op(state, "card_create", chat, 400)
                return refusal("param.outTrackIdExists", "a card with this outTrackId exists")
            content = card_map.get(self.card_key, "")
            state["cards"][track_id] = {"chat": chat, "template": template, "content": content,
                                        "history": [content], "finalized": False, "error": False, "at": now,
                                        "guids": {}}
            state["stats"]["cards_made"] += 1
            self._log_op(state, "card_create", chat, 200)
        await self.hold_if_asked("card_create", chat, fault is None)
        if fault == "drop_after":   # made, but the answer is lost: the ambiguous case
            return drop_connection(request)
        return web.json_response({"success": True, "result": {"outTrackId": track_id, "deliverResults": [
            {"spaceType": space_type, "spaceId": chat, "success": True, "carrierId": f"carrier-{track_id[-12:]}"}]}})

    async def stream_card(self, request: web.Request) -> web.Response:
        if not self.authorised(request):
            return web.json_response({"code": "InvalidAuthentication", "message": "token"}, status=401)
        params, now = await json_object(request), time.time()
        track_id, guid, content = params.get("outTrackId"), params.get("guid"), params.get("content")
        card = self.read(lambda s: s["cards"].get(track_id) if isinstance(track_id, str) else None)
        if card is None:
            return refusal("card.notFound", "no card has this outTrackId")
        if not isinstance(guid, str) or not guid or not isinstance(content, str):
            return refusal("param.invalid", "guid and content")
        if params.get("key") != self.card_key or params.get("isFull") is not True:
            return refusal("param.invalid", f"key must be the template's {self.card_key!r}; isFull true")
        if len(content) > self.limits["content_limit"]:
            return refusal("param.invalid", "content is too long")
        finalize, error = params.get("isFinalize") is True, params.get("isError") is True
        update = [content, finalize, error]
        with self.mutate() as state:
            _, answer = self.faulted(state, "card_stream", card["chat"], now, request)
            if answer is None:
                answer = self.over_card_qps(state, card["chat"], "card_stream", now)
            if answer is not None:
                return answer
            card = state["cards"][track_id]
            seen = card["guids"].get(guid)
            if seen is not None and seen != update:
                state["stats"]["card_guids_reused"] += 1
                self._log_op(state, "card_stream", card["chat"], 400)
                return refusal("param.guidReused", "this guid named another update")
            if seen is not None:
                state["stats"]["card_updates_repeated"] += 1
            else:
                card["guids"][guid] = update
                card["content"], card["error"] = content, card["error"] or error
                card["finalized"] = card["finalized"] or finalize
                card["history"].append(content)
                state["stats"]["card_updates"] += 1
            self._log_op(state, "card_stream", card["chat"], 200)
        return web.json_response({"success": True, "result": True})
