"""CheckoutBus subscriber with journal gap recovery (the protocol of docs/durability.md)."""
__version__ = "0.1.0"

from .cursor import FileCursor, MemoryCursor
from .envelope import Envelope
from .errors import ShardIdentity, SubscriberError
from .sequencer import Options, Statistics, SubscriptionSequencer

__all__ = ["Envelope", "FileCursor", "MemoryCursor", "Options", "ShardIdentity", "Statistics",
           "SubscriberError", "SubscriptionSequencer"]

try:  # the sockets need pyzmq; the sequencer and the cursor do not
    from .curve import CurveKeys  # noqa: F401
    from .producer import Acknowledgement, AcknowledgedSendError, send_acked  # noqa: F401
    from .subscriber import AsyncSubscriber, Subscriber  # noqa: F401
    __all__ += ["Acknowledgement", "AcknowledgedSendError", "AsyncSubscriber", "CurveKeys", "Subscriber",
                "send_acked"]
except ImportError:  # pragma: no cover
    pass
