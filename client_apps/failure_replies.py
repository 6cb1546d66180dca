"""A site's expected failure as Flower's error reply, not a raised exception: one line at the server, no traceback.

A ClientApp that raises makes Flower log the exception and its traceback for every message (a failing
site's 23 exchanges gave 23 tracebacks); :func:`reply_with_failure` answers a
:class:`~pfxab_flower.errors.ClientFailedError` (an objective's or a builder's exception, named with
its client and site) with the same error reply Flower would send, without them.
"""

from __future__ import annotations

from flwr.app import Context, Error, Message
from flwr.clientapp.typing import ClientAppCallable

from pfxab_flower.errors import ClientFailedError
from pfxab_flower.flower_shared.flower_internals import CLIENT_APP_RAISED
from pfxab_flower.running.client_session import LateReplyError


def reply_with_failure(message: Message, context: Context, call_next: ClientAppCallable) -> Message:
    """A mod: a failure of the node's objective becomes Flower's error reply with its one line as the reason.

    As when a ClientApp raises, the session kept nothing of the failed message; the server counts
    the reply as the client's failure and logs it (at most once per client and phase).

    An injected straggler's late reply (:class:`~pfxab_flower.running.client_session.LateReplyError`) still
    raises: Flower's simulation engine writes a ClientApp's context back whenever it returns, and the node's
    next message may already have run on another Ray actor while this one slept, so a returned reply would
    put the late message's stale state over the newer one. The server has stopped waiting for it anyway.
    """
    try:
        return call_next(message, context)
    except ClientFailedError as failure:
        if isinstance(failure.__cause__, LateReplyError):
            raise
        return Message(Error(code=CLIENT_APP_RAISED, reason=str(failure)), reply_to=message)
