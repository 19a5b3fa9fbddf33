"""Mutations of a valid request frame: bit flips, truncation, lengths that lie, huge and negative
counts, nulls, random bytes. Deterministic for a given random.Random.

Positions fall mostly in the request body (after `body_start`), sometimes in the header and
rarely in the API key and version, so most mutants reach the body decoding of the API they came
from instead of stopping at "unknown API key" or a bad client id.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass

API_KEY_AND_VERSION = 4

# Values that make length and count fields lie: null, negative, huge, off by one, varints.
INTERESTING = (
    b"\x00",  # compact null (length 0)
    b"\x01",  # compact empty
    b"\x7f",
    b"\x80",
    b"\xff",
    b"\xff\xff",  # legacy string null
    b"\xff\xfe",  # legacy string -2
    b"\x7f\xff",
    b"\x80\x00",
    b"\xff\xff\xff\xff",  # legacy array/bytes null
    b"\xff\xff\xff\xfe",  # -2
    b"\x7f\xff\xff\xff",  # int32 max
    b"\x80\x00\x00\x00",  # int32 min
    b"\x00\x00\x10\x00",
    b"\xff\xff\xff\xff\x0f",  # varint 0xffffffff: compact length 2^32 - 2
    b"\xff\xff\xff\xff\x7f",  # varint beyond 32 bits
    b"\x80\x80\x80\x80\x80\x01",  # varint longer than 5 bytes
    b"\xfe\xff\xff\xff\x07",  # varint 2^31 - 2
    b"\x80\x80\x04",  # varint 65536
)


@dataclass(frozen=True, slots=True)
class Mutant:
    frame: bytes
    size: int  # the size prefix to send: len(frame), unless it lies

    @property
    def size_lies(self) -> bool:
        return self.size != len(self.frame)


def mutate(rng: random.Random, frame: bytes, body_start: int) -> Mutant:
    mutator = _Mutator(rng, body_start)
    for _ in range(rng.choice((1, 1, 1, 1, 2, 2, 3))):
        frame = rng.choice(_MUTATIONS)(mutator, frame)
    size = len(frame)
    if rng.random() < 0.01:  # the size prefix lies too
        size = rng.choice((size - 1, size + 1, size + rng.randrange(1, 100), -1, 0x7FFFFFFF, 0))
    return Mutant(frame, size)


@dataclass(frozen=True, slots=True)
class _Mutator:
    rng: random.Random
    body_start: int

    def position(self, frame: bytes) -> int:
        draw = self.rng.random()
        low = self.body_start if draw < 0.85 else API_KEY_AND_VERSION if draw < 0.98 else 0
        return self.rng.randrange(min(low, len(frame)), len(frame) + 1)

    def flip_bits(self, frame: bytes) -> bytes:
        data = bytearray(frame)
        if not data:
            return frame
        for _ in range(self.rng.choice((1, 1, 1, 2, 3, 8))):
            pos = min(self.position(frame), len(data) - 1)
            data[pos] ^= 1 << self.rng.randrange(8)
        return bytes(data)

    def truncate(self, frame: bytes) -> bytes:
        return frame[: self.rng.randrange(len(frame) + 1)]

    def overwrite_interesting(self, frame: bytes) -> bytes:
        value = self.rng.choice(INTERESTING)
        pos = self.position(frame)
        return frame[:pos] + value + frame[pos + len(value) :]

    def insert_interesting(self, frame: bytes) -> bytes:
        pos = self.position(frame)
        return frame[:pos] + self.rng.choice(INTERESTING) + frame[pos:]

    def random_span(self, frame: bytes) -> bytes:
        pos, length = self.position(frame), self.rng.randrange(1, 33)
        return frame[:pos] + self.rng.randbytes(length) + frame[pos + length :]

    def insert_random(self, frame: bytes) -> bytes:
        pos = self.position(frame)
        return frame[:pos] + self.rng.randbytes(self.rng.randrange(1, 65)) + frame[pos:]

    def delete_span(self, frame: bytes) -> bytes:
        pos = self.position(frame)
        return frame[:pos] + frame[pos + self.rng.randrange(1, 17) :]

    def duplicate_span(self, frame: bytes) -> bytes:
        pos = self.position(frame)
        span = frame[pos : pos + self.rng.randrange(1, 33)]
        return frame[:pos] + span * self.rng.randrange(2, 5) + frame[pos:]

    def random_body(self, frame: bytes) -> bytes:
        """The header kept, then random bytes."""
        keep = min(len(frame), self.body_start)
        return frame[:keep] + self.rng.randbytes(self.rng.randrange(0, 200))

    def change_version(self, frame: bytes) -> bytes:
        """The same body under another version of the same API (or a far-off one)."""
        if len(frame) < API_KEY_AND_VERSION:
            return frame
        (version,) = struct.unpack_from(">h", frame, 2)
        rng = self.rng
        version = rng.choice((version - 1, version + 1, version + rng.randrange(-5, 6), -1, 0x7FFF))
        return frame[:2] + struct.pack(">h", max(-0x8000, min(0x7FFF, version))) + frame[4:]


_MUTATIONS: tuple[Callable[[_Mutator, bytes], bytes], ...] = (
    _Mutator.flip_bits,
    _Mutator.flip_bits,
    _Mutator.flip_bits,
    _Mutator.truncate,
    _Mutator.overwrite_interesting,
    _Mutator.overwrite_interesting,
    _Mutator.overwrite_interesting,
    _Mutator.insert_interesting,
    _Mutator.random_span,
    _Mutator.insert_random,
    _Mutator.delete_span,
    _Mutator.duplicate_span,
    _Mutator.random_body,
    _Mutator.change_version,
)
