"""CURVE client keys from the Z85 files `checkoutbus keygen` writes (docs/security.md)."""
import os
from typing import Optional

import zmq

from .errors import SubscriberError


def read_key(path: str) -> str:
    """The key in a key file: its first line that is not a `#` comment, trimmed (as the daemon reads it)."""
    try:
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise SubscriberError("curve_key", "cannot read the CURVE key %s: %s" % (path, e.strerror))
    for line in text.split("\n"):
        line = line.strip()
        if line and not line.startswith("#"):
            if len(line) != 40:
                break
            return line
    raise SubscriberError("curve_key", "%s does not hold a CURVE key (40 characters of Z85)" % path)


class CurveKeys:
    """A client's CURVE settings: its own key pair (from its secret key file, `NAME.key`) and the
    daemon's public key (`server.pub`)."""

    def __init__(self, secret_key: str, server_key: str):
        self.secret_key = secret_key.encode() if isinstance(secret_key, str) else secret_key
        self.server_key = server_key.encode() if isinstance(server_key, str) else server_key
        try:
            self.public_key = zmq.curve_public(self.secret_key)
        except (zmq.ZMQError, ValueError) as e:
            raise SubscriberError("curve_key", "not a CURVE secret key: %s" % e)

    @classmethod
    def from_files(cls, key: str, server: str) -> "CurveKeys":
        """`key`: this client's secret key file (`--curve-key`); `server`: the daemon's public key
        file (`--curve-server`)."""
        return cls(read_key(key), read_key(server))

    @classmethod
    def from_environment(cls) -> Optional["CurveKeys"]:
        """From `CHECKOUTBUS_CURVE_KEY` and `CHECKOUTBUS_CURVE_SERVER`, as every command reads them;
        None when neither is set."""
        key, server = os.environ.get("CHECKOUTBUS_CURVE_KEY"), os.environ.get("CHECKOUTBUS_CURVE_SERVER")
        if key is None and server is None:
            return None
        if key is None or server is None:
            raise SubscriberError("curve_key", "CURVE needs both CHECKOUTBUS_CURVE_KEY and CHECKOUTBUS_CURVE_SERVER")
        return cls.from_files(key, server)

    def apply(self, socket: "zmq.Socket") -> None:
        """Makes `socket` a CURVE client; call before connect."""
        socket.curve_secretkey = self.secret_key
        socket.curve_publickey = self.public_key
        socket.curve_serverkey = self.server_key


def curve_keys(curve) -> Optional[CurveKeys]:
    """A `curve=` argument: None, a CurveKeys, or a pair of paths (client secret key, server public key)."""
    if curve is None or isinstance(curve, CurveKeys):
        return curve
    key, server = curve
    return CurveKeys.from_files(key, server)
