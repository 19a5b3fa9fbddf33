"""The protocol layer's one error: a frame Kafka answers by closing the connection."""


class FrameError(Exception):
    """The frame cannot be served; Kafka closes the connection."""
