"""DingTalk (钉钉): an internal app (企业内部应用) with the robot ability in Stream mode (README.md beside this file).
Anyone in the organisation who can see the robot can write to it: strangers get a pairing code unless the table says
otherwise.

Pacing: a robot's session webhook takes 20 messages a minute (errcode 130101 past it, and the robot is then limited
for a while); the OpenAPI's sends share the organisation's QPS (HTTP 403 ``QpsLimit`` codes past it). A chat is paced
at 18 a minute with a burst of 5, under the webhook's 20. A text message's content is kept at 5,000 characters. A
robot's text message cannot be edited or recalled, so without a card template a streamed answer is sent whole, in
parts at the limit, and no send carries a key the platform deduplicates on (a send whose answer was lost goes again
with the re-sent mark). A table naming the app's AI card template (``card_template_id``) streams instead: each part
is a card (cards.py) whose content the edits replace, so its pacing says ``supports_edit``, and sends are keyed
(``idempotent_send``: the card's outTrackId, which the platform does not make twice). Those go by the OpenAPI, not
the session webhook, so the chat's pace is the OpenAPI's: a card's content is updated once a second at most, with
at least 20 new characters between two previews, and the app's card calls (creates and updates, across every chat)
go at 8 a second with a burst of 8: at most 16 in any second, under the 20 QPS an app of a standard-edition
organisation may call a server API with (more in the paid editions; a 403 ``QpsLimit`` code past it, waited out as
for the sends).

What the documentation says, and where it is silent (read for these numbers; kept in step with
tests/fakes/dingtalk/cards.py):

* The app's QPS: "对于标准版钉钉的组织,企业内部应用或第三方定制开发企业内部应用的每个应用调用服务端接口每秒并发的
  最高频次限制为20qps" (https://developer.aliyun.com/ask/585193; professional 40, exclusive 60:
  https://developer.aliyun.com/ask/615474). Those are answers on Alibaba Cloud's developer community quoting the
  platform; its own page on call frequency (open.dingtalk.com) was not found, so 20 is taken as the bound.
* The streaming update (``PUT /v1.0/card/streaming``): no rate of its own was found in the documentation read, so
  the once-a-second update of a card stays an assumption, far under the app's QPS.
* A create repeated under an outTrackId that exists: not found either. The card API's error table (as mirrored at
  https://teheggwhh1.apifox.cn/api-347060898) lists HTTP 400 ``param.*`` codes such as ``param.outTrackIdEmpty``,
  none for an existing outTrackId in the part read; the adapter keeps taking a 400 or 409 whose code names the
  outTrackId as existing or duplicated for the card made (cards.already_made), and the fake answers
  ``param.outTrackIdExists``, its own code.

Users' pictures and files come in (fetched by their download codes); nothing goes out but text (in cards or not)."""
from actors.adapters.spec import Capabilities, Option, Platform, paced

CAPABILITIES = Capabilities(edit=False, delete=False, threads=False, reactions=False, files_in=True,
                            files_out=False, voice=False, buttons=False, typing=False)


def _ping_is_sane(table):
    return ("ping_interval_s", "must be at least 1 second") if table["ping_interval_s"] < 1 else None


def _window_is_sane(table):
    if not 0 < table["max_signature_age_s"] <= 3600:
        return "max_signature_age_s", "must be above 0 and at most 3600 (the platform's hour)"
    return None


CARD_PACING = {"supports_edit": True, "idempotent_send": True, "edit_interval_s": 1.0, "min_edit_delta_chars": 20,
               "per_chat_ops_per_s": 1.0, "per_chat_burst": 3, "app_edit_ops_per_s": 8.0, "app_edit_burst": 8}


def _cards_stream(table):
    """A card template, a streamed answer: edits and keyed sends (the module docstring); none, final messages."""
    return CARD_PACING if table["card_template_id"] else {}


def _card_key_is_named(table):
    if table["card_template_id"] and not table["card_content_key"].strip():
        return "card_content_key", "must name the template's content variable (e.g. \"content\")"
    return None


PLATFORM = Platform(
    type="dingtalk", actor="actors.adapters.dingtalk.adapter.DingTalkAdapter",
    summary="DingTalk robot: Stream mode or signed HTTP callbacks in, the session webhook or the robot OpenAPI out", intake="socket",
    capabilities=CAPABILITIES, access="pairing",
    pacing=paced("dingtalk", CAPABILITIES, 5000, "chars", edit_interval_s=0.0, min_edit_delta_chars=0,
                 per_chat_ops_per_s=0.3, per_chat_burst=5, typing_interval_s=None),
    options={
        "client_id": Option(str, doc="the app's Client ID (AppKey), developer console: Credentials & Basic Info"),
        "client_secret": Option(str, secret=True, doc="the app's Client Secret (AppSecret), same page; the access "
                                                      "token and the stream's tickets are made from the two"),
        "robot_code": Option(str, "", doc="the robot's RobotCode (robot page); empty: the Client ID, which it is "
                                          "for a robot made in the app"),
        "base_url": Option(str, "https://api.dingtalk.com", doc="the OpenAPI's address (a fake, in tests)"),
        "session_webhook_prefix": Option(str, "https://oapi.dingtalk.com/", doc="a message's sessionWebhook is "
                                         "used only when it starts with this (anything else is never called)"),
        "inbound": Option(str, "stream", allowed=("stream", "http"),
                          doc='how the robot\'s messages arrive: "stream" (a WebSocket the gateway opens) or "http" '
                              "(the platform POSTs them to the robot's message URL)"),
        "callback_host": Option(str, "127.0.0.1", doc="http: the interface the callback server listens on "
                                                      "(loopback: behind the HTTPS proxy the message URL points at)"),
        "callback_port": Option(int, 8094, doc="http: its port (0: any free port)"),
        "callback_path": Option(str, "/dingtalk/robot", doc="http: its path (the message URL's path)"),
        "max_signature_age_s": Option(float, 3600.0, doc="http: a callback whose timestamp is further from now "
                                                          "than this is refused"),
        "bot_name": Option(str, "", doc="the robot's name as shown in groups: a leading @name is taken off the "
                                        "text of a group message"),
        "ping_interval_s": Option(float, 20.0, doc="a WebSocket ping goes after this long with nothing received; "
                                                   "no pong within half of it, the connection is taken for dead"),
        "webhook_margin_s": Option(float, 60.0, doc="a session webhook this close to its sessionWebhookExpiredTime "
                                                    "is not used: the robot send API is"),
        "rate_limit_wait_s": Option(float, 2.0, doc="how long a chat waits after a rate-limit answer (the platform "
                                                    "names no time)"),
        "card_template_id": Option(str, "", doc="the app's AI card template id (Card Platform, e.g. "
                                                "\"xxxx.schema\"): answers stream into a card made from it. Empty: "
                                                "answers are sent whole as text"),
        "card_content_key": Option(str, "content", doc="the template's variable the answer's text streams into"),
    },
    checks=(_ping_is_sane, _window_is_sane, _card_key_is_named),
    table_pacing=_cards_stream,
    served=lambda table: table["inbound"] == "http")
