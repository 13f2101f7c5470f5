"""The root actor's class and global name: the launcher creates it under this name, every admin command attaches to
it by the same (a module of its own, so an admin command loads these two strings and not the launcher)."""
ROOT_CLASS = "actors.root.Root"
ROOT_NAME = "gateway-root"
