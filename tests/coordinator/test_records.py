"""`__consumer_offsets` record codec: golden vectors from Kafka's schemas, every version."""

from __future__ import annotations

import dataclasses
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.coordinator.offsets import OffsetAndMetadata
from kafkalite.coordinator.records import (
    GroupMetadataKey,
    GroupMetadataRecord,
    InvalidRecord,
    MemberMetadataRecord,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_offset_commit_value,
    group_metadata_record,
    group_tombstone,
    offset_commit_record,
    offset_tombstone,
)


def hx(text: str) -> bytes:
    """Hex spelled out with spaces and `# comments`, one field per line."""
    return bytes.fromhex(re.sub(r"#.*", "", text))


# -- golden vectors, built by hand from the JSON schemas --

OFFSET_KEY = hx("""
    0001                    # record type 1: OffsetCommitKey
    0001 67                 # group "g"
    0001 74                 # topic "t"
    00000003                # partition 3
""")

OFFSET_VALUE_V3 = hx("""
    0003                    # value version 3 (what Kafka 4 writes without expiry)
    0000000000000064        # offset 100
    0000000a                # leaderEpoch 10
    0004 6d657461           # metadata "meta"
    00000000000004d2        # commitTimestamp 1234
""")

OFFSET_VALUE_V1 = hx("""
    0001                    # value version 1 (what Kafka 4 writes with an expiry)
    0000000000000064        # offset 100
    0004 6d657461           # metadata "meta" (v1 has no leaderEpoch)
    00000000000004d2        # commitTimestamp 1234
    0000000000001388        # expireTimestamp 5000
""")

GROUP_KEY = hx("""
    0002                    # record type 2: GroupMetadataKey
    0003 677270             # group "grp"
""")

MEMBER = MemberMetadataRecord(
    member_id="m-1",
    group_instance_id="i-1",
    client_id="c",
    client_host="/10.0.0.1",
    rebalance_timeout_ms=300_000,
    session_timeout_ms=45_000,
    subscription=b"\x00\x01",
    assignment=b"",
)
GROUP = GroupMetadataRecord(
    protocol_type="consumer",
    generation=5,
    protocol_name="range",
    leader="m-1",
    current_state_timestamp_ms=1_700_000_000_000,
    members=(MEMBER,),
)

GROUP_VALUE_V3 = hx("""
    0003                    # value version 3 (what Kafka 4 writes)
    0008 636f6e73756d6572   # protocolType "consumer"
    00000005                # generation 5
    0005 72616e6765         # protocol "range"
    0003 6d2d31             # leader "m-1"
    0000018bcfe56800        # currentStateTimestamp 1700000000000
    00000001                # members: 1
      0003 6d2d31           #   memberId "m-1"
      0003 692d31           #   groupInstanceId "i-1"
      0001 63               #   clientId "c"
      0009 2f31302e302e302e31  # clientHost "/10.0.0.1"
      000493e0              #   rebalanceTimeout 300000
      0000afc8              #   sessionTimeout 45000
      00000002 0001         #   subscription 00 01
      00000000              #   assignment (empty)
""")

EMPTY_GROUP_VALUE_V3 = hx("""
    0003                    # Kafka's newEmptyGroupMetadataRecord
    0000                    # protocolType ""
    00000000                # generation 0
    ffff                    # protocol null
    ffff                    # leader null
    0000018bcfe56800        # currentStateTimestamp 1700000000000
    00000000                # members: 0
""")


def test_offset_commit_record_is_key_type_1_and_value_v3():
    value = OffsetAndMetadata(100, leader_epoch=10, metadata="meta", commit_timestamp_ms=1234)

    assert offset_commit_record("g", "t", 3, value) == (OFFSET_KEY, OFFSET_VALUE_V3)


def test_offset_commit_record_with_expiry_is_v1_which_drops_the_leader_epoch():
    value = OffsetAndMetadata(100, 10, "meta", 1234, expire_timestamp_ms=5000)

    key, encoded = offset_commit_record("g", "t", 3, value)

    assert (key, encoded) == (OFFSET_KEY, OFFSET_VALUE_V1)
    assert decode_offset_commit_value(encoded) == dataclasses.replace(value, leader_epoch=-1)


def test_offset_commit_round_trip():
    value = OffsetAndMetadata(100, 10, "meta", 1234)
    key, encoded = offset_commit_record("g", "t", 3, value)

    assert decode_key(key) == OffsetCommitKey("g", "t", 3)
    assert decode_offset_commit_value(encoded) == value


def test_offset_tombstone():
    key, value = offset_tombstone("g", "t", 3)

    assert (key, value) == (OFFSET_KEY, None)
    assert decode_key(key) == OffsetCommitKey("g", "t", 3)


def test_group_metadata_record_is_key_type_2_and_value_v3():
    assert group_metadata_record("grp", GROUP) == (GROUP_KEY, GROUP_VALUE_V3)


def test_empty_group_metadata_golden():
    empty = GroupMetadataRecord("", 0, None, None, 1_700_000_000_000)

    assert group_metadata_record("grp", empty) == (GROUP_KEY, EMPTY_GROUP_VALUE_V3)
    assert decode_group_metadata_value(EMPTY_GROUP_VALUE_V3) == empty


def test_group_metadata_round_trip():
    key, value = group_metadata_record("grp", GROUP)

    assert decode_key(key) == GroupMetadataKey("grp")
    assert decode_group_metadata_value(value) == GROUP


def test_group_tombstone():
    key, value = group_tombstone("grp")

    assert (key, value) == (GROUP_KEY, None)
    assert decode_key(key) == GroupMetadataKey("grp")


# -- keys --


def test_legacy_key_type_0_is_an_offset_commit_key():
    assert decode_key(b"\x00\x00" + OFFSET_KEY[2:]) == OffsetCommitKey("g", "t", 3)


@pytest.mark.parametrize("record_type", [-1, 3, 4, 5, 8, 9, 16, 17, 26, 0x7FFF])
def test_other_key_types_are_not_ours(record_type):
    # Kafka 4's consumer/share/streams group records: their bodies are not parsed at all.
    assert decode_key(record_type.to_bytes(2, "big", signed=True) + b"\xff\x00junk") is None


@pytest.mark.parametrize("key", [OFFSET_KEY, GROUP_KEY])
def test_truncated_key_is_invalid(key):
    for end in range(len(key)):
        with pytest.raises(InvalidRecord):
            decode_key(key[:end])


def test_key_with_trailing_bytes_is_invalid():
    with pytest.raises(InvalidRecord):
        decode_key(GROUP_KEY + b"\x00")


# -- older and newer value versions, as Kafka (or an older Kafka) wrote them --


def test_decode_offset_commit_value_v0():
    data = hx("""
        0000                # version 0
        0000000000000064    # offset 100
        0004 6d657461       # metadata "meta"
        00000000000004d2    # commitTimestamp 1234
    """)

    assert decode_offset_commit_value(data) == OffsetAndMetadata(100, -1, "meta", 1234, None)


def test_decode_offset_commit_value_v1_without_expiry():
    data = hx("""
        0001                # version 1
        0000000000000064    # offset 100
        0000                # metadata ""
        00000000000004d2    # commitTimestamp 1234
        ffffffffffffffff    # expireTimestamp -1: none
    """)

    assert decode_offset_commit_value(data) == OffsetAndMetadata(100, -1, "", 1234, None)


def test_decode_offset_commit_value_v2():
    data = hx("""
        0002                # version 2: v0's fields again
        0000000000000064    # offset 100
        0004 6d657461       # metadata "meta"
        00000000000004d2    # commitTimestamp 1234
    """)

    assert decode_offset_commit_value(data) == OffsetAndMetadata(100, -1, "meta", 1234, None)


def test_decode_offset_commit_value_v1_golden():
    assert decode_offset_commit_value(OFFSET_VALUE_V1) == OffsetAndMetadata(
        100, -1, "meta", 1234, 5000
    )


def test_decode_offset_commit_value_v4_skips_unknown_tagged_fields():
    data = hx("""
        0004                # version 4, flexible
        0000000000000064    # offset 100
        0000000a            # leaderEpoch 10
        05 6d657461         # metadata "meta": compact, length + 1
        00000000000004d2    # commitTimestamp 1234
        01                  # 1 tagged field
          07 02 abcd        #   tag 7, 2 bytes: unknown to us, skipped
    """)

    assert decode_offset_commit_value(data) == OffsetAndMetadata(100, 10, "meta", 1234, None)


def test_encode_offset_commit_value_v4():
    value = OffsetAndMetadata(100, 10, "meta", 1234)

    assert encode_offset_commit_value(value, 4) == hx("""
        0004 0000000000000064 0000000a 05 6d657461 00000000000004d2
        00                  # no tagged fields
    """)


def test_decode_group_metadata_value_v0_defaults_rebalance_timeout_to_session_timeout():
    data = hx("""
        0000                    # version 0
        0008 636f6e73756d6572   # protocolType "consumer"
        00000005                # generation 5
        0005 72616e6765         # protocol "range"
        0003 6d2d31             # leader "m-1"
        00000001                # members: 1 (no currentStateTimestamp before v2)
          0003 6d2d31           #   memberId "m-1" (no groupInstanceId before v3)
          0001 63               #   clientId "c"
          0009 2f31302e302e302e31  # clientHost
          0000afc8              #   sessionTimeout 45000 (no rebalanceTimeout in v0)
          00000002 0001         #   subscription
          00000000              #   assignment
    """)

    member = dataclasses.replace(MEMBER, group_instance_id=None, rebalance_timeout_ms=45_000)
    expected = dataclasses.replace(GROUP, current_state_timestamp_ms=-1, members=(member,))
    assert decode_group_metadata_value(data) == expected


def test_decode_group_metadata_value_v1():
    data = hx("""
        0001 0008 636f6e73756d6572 00000005 0005 72616e6765 0003 6d2d31
        00000001
          0003 6d2d31 0001 63 0009 2f31302e302e302e31
          000493e0              #   rebalanceTimeout 300000, from v1
          0000afc8 00000002 0001 00000000
    """)

    member = dataclasses.replace(MEMBER, group_instance_id=None)
    expected = dataclasses.replace(GROUP, current_state_timestamp_ms=-1, members=(member,))
    assert decode_group_metadata_value(data) == expected


def test_decode_group_metadata_value_v2():
    data = hx("""
        0002 0008 636f6e73756d6572 00000005 0005 72616e6765 0003 6d2d31
        0000018bcfe56800        # currentStateTimestamp, from v2
        00000001
          0003 6d2d31 0001 63 0009 2f31302e302e302e31 000493e0 0000afc8 00000002 0001 00000000
    """)

    member = dataclasses.replace(MEMBER, group_instance_id=None)
    assert decode_group_metadata_value(data) == dataclasses.replace(GROUP, members=(member,))


def test_decode_group_metadata_value_v4_flexible():
    data = hx("""
        0004                    # version 4, flexible
        09 636f6e73756d6572     # protocolType, compact
        00000005
        06 72616e6765           # protocol "range"
        00                      # leader null (compact 0)
        0000018bcfe56800
        02                      # members: compact count 1 + 1
          04 6d2d31             #   memberId
          00                    #   groupInstanceId null
          02 63 0a 2f31302e302e302e31
          000493e0 0000afc8
          03 0001               #   subscription, compact bytes
          01                    #   assignment, empty
          01 00 01 ff           #   member tagged fields: tag 0, 1 byte (skipped)
        00                      # no top-level tagged fields
    """)

    member = dataclasses.replace(MEMBER, group_instance_id=None)
    expected = dataclasses.replace(GROUP, leader=None, members=(member,))
    assert decode_group_metadata_value(data) == expected


@pytest.mark.parametrize("version", range(5))
def test_group_metadata_value_round_trips_in_every_version(version):
    assert decode_group_metadata_value(encode_group_metadata_value(GROUP, version)) == (
        _as_of_version(GROUP, version)
    )


def _as_of_version(record: GroupMetadataRecord, version: int) -> GroupMetadataRecord:
    """What survives a trip through `version`, with Kafka's defaults for the rest."""
    members = tuple(_member_as_of_version(member, version) for member in record.members)
    timestamp = record.current_state_timestamp_ms if version >= 2 else -1
    return dataclasses.replace(record, current_state_timestamp_ms=timestamp, members=members)


def _member_as_of_version(member: MemberMetadataRecord, version: int) -> MemberMetadataRecord:
    if version < 3:
        member = dataclasses.replace(member, group_instance_id=None)
    if version < 1:
        member = dataclasses.replace(member, rebalance_timeout_ms=member.session_timeout_ms)
    return member


# -- corrupt values --

ALL_VALUES = [
    pytest.param(decode_offset_commit_value, OFFSET_VALUE_V3, id="offset-v3"),
    pytest.param(decode_offset_commit_value, OFFSET_VALUE_V1, id="offset-v1"),
    pytest.param(
        decode_offset_commit_value,
        encode_offset_commit_value(OffsetAndMetadata(1, 2, "m", 3), 4),
        id="offset-v4",
    ),
    pytest.param(decode_group_metadata_value, GROUP_VALUE_V3, id="group-v3"),
    pytest.param(decode_group_metadata_value, encode_group_metadata_value(GROUP, 4), id="group-v4"),
]


@pytest.mark.parametrize(("decode", "data"), ALL_VALUES)
def test_truncated_value_is_invalid(decode, data):
    for end in range(len(data)):
        with pytest.raises(InvalidRecord):
            decode(data[:end])


@pytest.mark.parametrize(("decode", "data"), ALL_VALUES)
def test_value_with_trailing_bytes_is_invalid(decode, data):
    with pytest.raises(InvalidRecord, match="trailing"):
        decode(data + b"\x00")


@pytest.mark.parametrize("version", [-1, 5, 0x7FFF])
@pytest.mark.parametrize("decode", [decode_offset_commit_value, decode_group_metadata_value])
def test_unknown_value_version_is_invalid(decode, version):
    with pytest.raises(InvalidRecord, match="version"):
        decode(version.to_bytes(2, "big", signed=True) + OFFSET_VALUE_V3[2:])


@pytest.mark.parametrize(
    ("decode", "data", "reason"),
    [
        # metadata is not nullable
        (decode_offset_commit_value, hx("0003 0000000000000064 0000000a ffff 00"), "null"),
        # a negative length other than -1
        (decode_offset_commit_value, hx("0003 0000000000000064 0000000a fffe 00"), "negative"),
        # invalid UTF-8 in the metadata
        (decode_offset_commit_value, hx("0003 0000000000000064 0000000a 0001 ff"), "UTF-8"),
        # a compact length whose varint never ends
        (decode_offset_commit_value, hx("0004 0000000000000064 0000000a ffffffffff"), "varint"),
        # members array claims 2^31-1 entries
        (
            decode_group_metadata_value,
            hx("0003 0000 00000000 ffff ffff 0000000000000000 7fffffff"),
            "overruns",
        ),
        # members array is null
        (decode_group_metadata_value, hx("0001 0000 00000000 ffff ffff ffffffff"), "null"),
        # subscription bytes null
        (
            decode_group_metadata_value,
            hx("0000 0000 00000000 ffff ffff 00000001 0000 0000 0000 00000000 ffffffff"),
            "null",
        ),
    ],
)
def test_malformed_value_is_invalid(decode, data, reason):
    with pytest.raises(InvalidRecord, match=reason):
        decode(data)


@given(st.binary(max_size=64))
def test_garbage_is_decoded_or_refused_cleanly(data):
    for decode in (decode_key, decode_offset_commit_value, decode_group_metadata_value):
        try:
            decode(data)
        except InvalidRecord:
            pass


@given(st.data())
def test_corrupted_valid_values_never_leak_other_errors(data):
    value = bytearray(data.draw(st.sampled_from([GROUP_VALUE_V3, OFFSET_VALUE_V3])))
    index = data.draw(st.integers(0, len(value) - 1))
    value[index] = data.draw(st.integers(0, 255))
    for decode in (decode_offset_commit_value, decode_group_metadata_value):
        try:
            decode(bytes(value))
        except InvalidRecord:
            pass


# -- encoding refuses what Kafka cannot write --


def test_encode_refuses_out_of_range_ints_and_versions():
    with pytest.raises(ValueError):
        offset_commit_record("g", "t", 2**31, OffsetAndMetadata(0))
    with pytest.raises(ValueError):
        offset_commit_record("g", "t", 0, OffsetAndMetadata(2**63))
    with pytest.raises(ValueError):
        encode_group_metadata_value(GROUP, 5)


def test_encode_refuses_strings_over_32767_bytes():
    with pytest.raises(ValueError, match="too long"):
        offset_commit_record("g", "t", 0, OffsetAndMetadata(0, metadata="x" * 32768))


# -- properties --

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=20)

offsets = st.builds(
    OffsetAndMetadata,
    offset=INT64,
    leader_epoch=INT32,
    metadata=TEXT,
    commit_timestamp_ms=INT64,
    expire_timestamp_ms=st.none() | INT64.filter(lambda ts: ts != -1),
)
members = st.builds(
    MemberMetadataRecord,
    member_id=TEXT,
    group_instance_id=st.none() | TEXT,
    client_id=TEXT,
    client_host=TEXT,
    rebalance_timeout_ms=INT32,
    session_timeout_ms=INT32,
    subscription=st.binary(max_size=20),
    assignment=st.binary(max_size=20),
)
groups = st.builds(
    GroupMetadataRecord,
    protocol_type=TEXT,
    generation=INT32,
    protocol_name=st.none() | TEXT,
    leader=st.none() | TEXT,
    current_state_timestamp_ms=INT64,
    members=st.lists(members, max_size=3).map(tuple),
)


@given(TEXT, TEXT, INT32, offsets)
def test_offset_commit_record_round_trips(group_id, topic, partition, value):
    key, encoded = offset_commit_record(group_id, topic, partition, value)

    assert decode_key(key) == OffsetCommitKey(group_id, topic, partition)
    expected = value
    if value.expire_timestamp_ms is not None:
        expected = dataclasses.replace(value, leader_epoch=-1)  # written as v1: no leader epoch
    assert decode_offset_commit_value(encoded) == expected


@given(TEXT, groups, st.integers(0, 4))
def test_group_metadata_round_trips(group_id, record, version):
    key, _ = group_metadata_record(group_id, record)

    assert decode_key(key) == GroupMetadataKey(group_id)
    encoded = encode_group_metadata_value(record, version)
    assert decode_group_metadata_value(encoded) == _as_of_version(record, version)
