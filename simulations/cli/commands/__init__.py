"""Sub-commands of ``pfxab``; each module has ``register(subparsers)`` and a handler."""
