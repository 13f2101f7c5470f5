"""The WeCom (企业微信) adapter (actors/adapters/wecom/README.md): ``adapter`` (the actor), ``callback_server`` (the callback URL
WeCom calls), ``crypto`` (signatures and AES), ``messages`` (callback XML -> MessageEvent), ``api`` (the access
token, message/send, message/recall, media/get)."""
