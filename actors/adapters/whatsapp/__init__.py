"""The WhatsApp Cloud API adapter (actors/adapters/whatsapp/README.md): ``adapter`` (the actor), ``webhook_server``
(the webhook URL Meta calls), ``inbound`` (signatures, webhook JSON -> MessageEvent), ``client`` (the Graph API)."""
