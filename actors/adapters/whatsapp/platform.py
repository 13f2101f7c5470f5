"""WhatsApp through Meta's Cloud API: one business phone number; signed webhooks in, the Graph API out (README.md
beside this file). Anyone with WhatsApp can write to the number: strangers get a pairing code unless the table says
otherwise.

Pacing, from Meta's documentation: a text holds 4,096 characters; one phone number sends at most
``PHONE_NUMBER_MESSAGES_PER_S`` messages a second (the Cloud API's default throughput, error 130429 past it), kept
by the adapter across its chats; one user may be sent about one message every 6 s before the pair rate limit
(131056) refuses more, with short bursts allowed: a chat sends at most one every 6.25 s, burst 4. No edits and no
deletes exist for a sent message, so answers go out once, final. The typing indicator shows for up to 25 s or
until the next message. Files go up with POST /media and out as an image (JPEG or PNG up to 5 MB) or a
document (up to 100 MB), their captions 1,024 characters. No idempotency key exists: a send whose answer was lost
is re-sent with the mark. Past the 24-hour customer service window only an approved template message reaches a
user: ``window_template`` names one (its body's one parameter carries the reply, at most
``TEMPLATE_PARAMETER_LIMIT_CHARS``)."""
import re

from actors.adapters.spec import Capabilities, Option, Platform, paced

PHONE_NUMBER_MESSAGES_PER_S = 80.0   # the Cloud API's default throughput per business phone number
PHONE_NUMBER_BURST = 20
CUSTOMER_SERVICE_WINDOW_S = 24 * 3600.0   # free text only within 24 h of the user's last message (131047 past it)
# A body parameter of a template holds 32,768 characters when the template has nothing but a body, 1,024 when it
# has a header, footer or buttons too: the bound every approved template takes.
TEMPLATE_PARAMETER_LIMIT_CHARS = 1024
TEMPLATE_NAME = re.compile(r"[a-z0-9_]{1,512}")          # Meta's rule for a template's name
TEMPLATE_LANGUAGE = re.compile(r"[a-z]{2,3}(_[A-Za-z]{2,4})?")   # a language and locale code: en, en_US, zh_HK

def _secrets_are_set(table):
    """An empty app secret would make every forged webhook's signature computable: refused at load."""
    for key in ("app_secret", "verify_token", "access_token"):
        if not str(table.get(key) or "").strip():
            return key, "must not be empty"
    return None


def _window_template_is_named_as_meta_names_them(table):
    """A template name or language Meta could never accept would fail every reply past the window: refused at
    load, with what is wrong."""
    name, language = table.get("window_template"), table.get("window_template_language")
    if name and not TEMPLATE_NAME.fullmatch(name):
        return "window_template", (f"{name!r} is no template name: lowercase letters, digits and '_', up to 512 "
                                   "(the name in WhatsApp Manager > Message templates; empty: none is sent)")
    if not TEMPLATE_LANGUAGE.fullmatch(language or ""):
        return "window_template_language", (f"{language!r} is no template language code: a language and locale "
                                            "as WhatsApp Manager shows them, such as en_US, en, pt_BR")
    return None


CAPABILITIES = Capabilities(edit=False, delete=False, threads=False, reactions=True, files_in=True, files_out=True,
                            voice=True, buttons=False, typing=True)

PLATFORM = Platform(
    type="whatsapp", actor="actors.adapters.whatsapp.adapter.WhatsAppAdapter",
    summary="WhatsApp through Meta's Cloud API: signed webhooks in, the Graph API out", intake="server",
    capabilities=CAPABILITIES, access="pairing",
    pacing=paced("whatsapp", CAPABILITIES, 4096, "chars", edit_interval_s=0.0, min_edit_delta_chars=0,
                 per_chat_ops_per_s=0.16, per_chat_burst=4, typing_interval_s=20.0,
                 upload_limit_bytes=100 * 1024 * 1024, photo_limit_bytes=5 * 1024 * 1024, caption_limit=1024),
    options={
        "phone_number_id": Option(str, doc="the business phone number's id (WhatsApp > API Setup), not the number"),
        "access_token": Option(str, secret=True, doc="a system user's permanent access token with "
                                                     "whatsapp_business_messaging"),
        "app_secret": Option(str, secret=True, doc="the Meta app's App Secret: every webhook is signed with it "
                                                   "(X-Hub-Signature-256)"),
        "verify_token": Option(str, secret=True, doc="the Verify Token typed into the app's webhook settings"),
        "base_url": Option(str, "https://graph.facebook.com", doc="the Graph API (a fake, in tests)"),
        "api_version": Option(str, "v21.0", doc="the Graph API version in every path"),
        "webhook_host": Option(str, "127.0.0.1", doc="interface the webhook server listens on (loopback: behind a "
                                                     "TLS proxy)"),
        "webhook_port": Option(int, 8091, doc="its port (0: any free port)"),
        "webhook_path": Option(str, "/whatsapp/webhook", doc="its path (the Callback URL's path)"),
        "rate_limit_wait_s": Option(float, 6.0, doc="how long a chat waits after a rate limit (130429, 131056), "
                                                    "for which the Graph API names no wait"),
        "mark_read": Option(bool, True, doc="show the user's message read (blue ticks) with the typing indicator "
                                            "while its answer is written (WhatsApp shows typing only with a read "
                                            "mark)"),
        "window_template": Option(str, "", doc="an approved template sent instead of a text reply due after the "
                                               "24-hour customer service window closed, the reply in its body's "
                                               "one parameter ({{1}}); empty: such a reply fails, with the reason"),
        "window_template_language": Option(str, "en_US", doc="the language code of that template, as approved"),
    },
    checks=(_secrets_are_set, _window_template_is_named_as_meta_names_them))
