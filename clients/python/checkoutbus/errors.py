class SubscriberError(Exception):
    """A subscriber cannot go on: `kind` is one of refused, bad_reply, wrong_shard, endpoint_mismatch,
    cursor_mismatch, cursor_unusable, cursor_in_use (the Swift client's SubscriberError kinds), curve_key, or closed
    (used after close())."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class ShardIdentity:
    """The shard an endpoint pair must be: `shard` of `shards`."""

    def __init__(self, shard: int, shards: int):
        self.shard = shard
        self.shards = shards

    def mismatch(self, endpoint: str, found: str) -> SubscriberError:
        return SubscriberError(
            "wrong_shard",
            "%s was given as shard %d/%d but is %s: the endpoint list is out of order or from another deployment"
            % (endpoint, self.shard, self.shards, found))
