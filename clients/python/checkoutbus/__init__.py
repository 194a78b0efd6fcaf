"""CheckoutBus subscriber with journal gap recovery (the protocol of docs/durability.md)."""
from .cursor import FileCursor, MemoryCursor
from .envelope import Envelope
from .errors import ShardIdentity, SubscriberError
from .sequencer import Options, Statistics, SubscriptionSequencer

__all__ = ["Envelope", "FileCursor", "MemoryCursor", "Options", "ShardIdentity", "Statistics",
           "SubscriberError", "SubscriptionSequencer"]

try:  # the sockets need pyzmq; the sequencer and the cursor do not
    from .subscriber import Subscriber  # noqa: F401
    __all__.append("Subscriber")
except ImportError:  # pragma: no cover
    pass
