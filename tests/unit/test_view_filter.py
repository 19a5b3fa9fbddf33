"""The views' filter language (broker/view_filter.py): every operator, SQL's three-valued
logic, numeric vs textual comparison, and errors that name their position."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.view_filter import (
    EVERY_RECORD,
    NO_RECORD,
    SOME_RECORDS,
    FilterSyntaxError,
    parse,
)


def matches(text: str, key: bytes | None = None, **headers: str | None) -> bool:
    encoded = [(name, None if v is None else v.encode()) for name, v in headers.items()]
    return parse(text).matches(key, encoded)


@pytest.mark.parametrize(
    ("text", "headers", "expected"),
    [
        # = and <> on text
        ("region = 'eu'", {"region": "eu"}, True),
        ("region = 'eu'", {"region": "us"}, False),
        ("region <> 'eu'", {"region": "us"}, True),
        ("region <> 'eu'", {"region": "eu"}, False),
        # numbers: numeric when both sides are numbers
        ("n = 10", {"n": "10"}, True),
        ("n = 10", {"n": "10.0"}, True),
        ("n = 10", {"n": " 10 "}, True),
        ("n > 9", {"n": "10"}, True),  # textually "10" < "9"
        ("n < 9", {"n": "10"}, False),
        ("n >= 10", {"n": "10"}, True),
        ("n <= 10", {"n": "10"}, True),
        ("n <= 10", {"n": "11"}, False),
        ("n > -1.5", {"n": "-1"}, True),
        ("n < 1e3", {"n": "999"}, True),
        ("n <> 3", {"n": "4"}, True),
        # text against a string literal stays textual, even when it reads as a number
        ("v = '1.10'", {"v": "1.1"}, False),
        ("v > '9'", {"v": "10"}, False),
        ("v < 'b'", {"v": "a"}, True),
        # a number against a text that is not one: UNKNOWN, so neither it nor its NOT match
        ("n > 5", {"n": "abc"}, False),
        ("NOT n > 5", {"n": "abc"}, False),
        ("n = 5", {"n": "abc"}, False),
        ("n <> 5", {"n": "abc"}, False),
        # IN and NOT IN
        ("tag IN ('a', 'b')", {"tag": "b"}, True),
        ("tag IN ('a', 'b')", {"tag": "c"}, False),
        ("tag NOT IN ('a', 'b')", {"tag": "c"}, True),
        ("tag NOT IN ('a', 'b')", {"tag": "a"}, False),
        ("n IN (1, 2, 3)", {"n": "2"}, True),
        ("n IN (1, 'x')", {"n": "x"}, True),
        # BETWEEN and NOT BETWEEN (inclusive)
        ("n BETWEEN 1 AND 3", {"n": "1"}, True),
        ("n BETWEEN 1 AND 3", {"n": "3"}, True),
        ("n BETWEEN 1 AND 3", {"n": "4"}, False),
        ("n NOT BETWEEN 1 AND 3", {"n": "4"}, True),
        ("n NOT BETWEEN 1 AND 3", {"n": "2"}, False),
        ("s BETWEEN 'a' AND 'c'", {"s": "b"}, True),
        # IS NULL / IS NOT NULL: a missing header and a null value are NULL
        ("a IS NULL", {}, True),
        ("a IS NULL", {"a": None}, True),
        ("a IS NULL", {"a": ""}, False),
        ("a IS NOT NULL", {"a": ""}, True),
        ("a IS NOT NULL", {}, False),
        # AND, OR, NOT, parentheses and precedence (NOT > AND > OR)
        ("a = '1' AND b = '2'", {"a": "1", "b": "2"}, True),
        ("a = '1' AND b = '2'", {"a": "1", "b": "3"}, False),
        ("a = '1' OR b = '2'", {"a": "0", "b": "2"}, True),
        ("a = '1' OR b = '2'", {"a": "0", "b": "0"}, False),
        ("NOT a = '1'", {"a": "2"}, True),
        ("NOT NOT a = '1'", {"a": "1"}, True),
        ("a = '1' OR b = '1' AND c = '1'", {"a": "1", "b": "0", "c": "0"}, True),
        ("(a = '1' OR b = '1') AND c = '1'", {"a": "1", "b": "0", "c": "0"}, False),
        ("NOT (a = '1' OR b = '1')", {"a": "0", "b": "0"}, True),
        # three-valued logic with a missing header
        ("missing = 'x' OR a = '1'", {"a": "1"}, True),
        ("missing = 'x' AND a = '1'", {"a": "1"}, False),
        ("NOT (missing = 'x' AND a = '2')", {"a": "1"}, True),  # UNKNOWN AND FALSE = FALSE
        ("NOT (missing = 'x' OR a = '2')", {"a": "1"}, False),  # UNKNOWN OR FALSE = UNKNOWN
        ("missing <> 'x'", {}, False),
        ("missing IN ('x')", {}, False),
        ("missing NOT IN ('x')", {}, False),
        # literals, keywords in any case, quoted and dotted names
        ("TRUE", {}, True),
        ("false", {}, False),
        ("NOT FALSE", {}, True),
        ("a = 'x' and not b is null", {"a": "x", "b": "y"}, True),
        ("\"content-type\" = 'json'", {"content-type": "json"}, True),
        ("app.region = 'eu'", {"app.region": "eu"}, True),
        ("$sys = 'x'", {"$sys": "x"}, True),
        ("q = 'it''s'", {"q": "it's"}, True),
        ("régión = 'eu'", {"régión": "eu"}, True),
        ("v = 'é'", {"v": "é"}, True),
        # header against header
        ("a = b", {"a": "x", "b": "x"}, True),
        ("a < b", {"a": "9", "b": "10"}, True),  # both numbers: numeric
        ("a < b", {"a": "9", "b": "1x"}, False),  # textual
        ("1 = 1", {}, True),
    ],
)
def test_operators(text: str, headers: dict[str, str | None], expected: bool) -> None:
    assert matches(text, **headers) is expected


def test_key_is_the_record_key() -> None:
    assert matches("__key = 'k1'", key=b"k1")
    assert not matches("__key = 'k1'", key=b"k2")
    assert matches("__key IS NULL", key=None)
    assert matches("__key > 10", key=b"11")
    assert parse("__key = 'a' AND x = 'b'").names == {"__key", "x"}


def test_the_last_header_of_a_name_wins() -> None:
    f = parse("a = '2'")
    assert f.matches(None, [("a", b"1"), ("a", b"2")])
    assert not f.matches(None, [("a", b"2"), ("a", b"1")])


def test_invalid_utf8_never_equals_a_literal() -> None:
    assert not parse("a = 'x'").matches(None, [("a", b"\xff")])
    assert parse("a IS NOT NULL").matches(None, [("a", b"\xff")])


@pytest.mark.parametrize(
    ("text", "position", "says"),
    [
        ("", 1, "empty filter"),
        ("   ", 4, "empty filter"),
        ("region =", 9, "expected a value after ="),
        ("region = 'eu' AND", 18, "expected a condition"),
        ("region = 'eu", 10, "unterminated quoted string"),
        ('"region = 1', 1, "unterminated quoted identifier"),
        ('"" = 1', 1, "empty quoted header name"),
        ("a != 1", 3, "'!=' is not SQL"),
        ("a == 1", 4, "expected a value after ="),
        ("a IN ()", 7, "expected a string or number in the IN list"),
        ("a IN (b)", 7, "expected a string or number in the IN list"),
        ("a IN ('x' 'y')", 11, "expected ',' or ')'"),
        ("a IN 'x'", 6, "expected '(' after IN"),
        ("a BETWEEN 1", 12, "expected AND in BETWEEN"),
        ("a BETWEEN 1 AND", 16, "expected a value after AND"),
        ("(a = 1", 7, "expected ')'"),
        ("a = 1)", 6, "expected AND, OR or the end"),
        ("a", 2, "expected a comparison"),
        ("a IS 1", 6, "expected NULL after IS"),
        ("a IS NOT 1", 10, "expected NULL after IS NOT"),
        ("a NOT = 1", 7, "expected IN or BETWEEN after NOT"),
        ("a = 1 b = 2", 7, "expected AND, OR or the end"),
        ("a = 1 AND OR b = 2", 11, "expected a condition"),
        ("a = #", 5, "unexpected character '#'"),
        ("a LIKE 'x%'", 3, "expected a comparison"),
        ("AND = 1", 1, "expected a condition"),
    ],
)
def test_syntax_errors_name_the_position(text: str, position: int, says: str) -> None:
    with pytest.raises(FilterSyntaxError) as raised:
        parse(text)
    assert raised.value.position == position
    assert says in str(raised.value)
    assert f"at position {position}" in str(raised.value)


# -- properties --------------------------------------------------------------------------------

_NAMES = st.sampled_from(["a", "b", "c"])
_VALUES = st.one_of(st.none(), st.sampled_from(["x", "y", "1", "2", "10", "-3", "2.5", "", "abc"]))
_LITERALS = st.sampled_from(["'x'", "'y'", "'1'", "1", "2", "10", "-3", "2.5"])
_OPS = st.sampled_from(["=", "<>", "<", "<=", ">", ">="])


@st.composite
def _atoms(draw: st.DrawFn) -> str:
    name = draw(_NAMES)
    kind = draw(st.sampled_from(["cmp", "in", "between", "null"]))
    if kind == "cmp":
        return f"{name} {draw(_OPS)} {draw(_LITERALS)}"
    if kind == "in":
        items = draw(st.lists(_LITERALS, min_size=1, max_size=3))
        return f"{name} {draw(st.sampled_from(['', 'NOT ']))}IN ({', '.join(items)})"
    if kind == "between":
        return f"{name} BETWEEN {draw(_LITERALS)} AND {draw(_LITERALS)}"
    return f"{name} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"


_EXPRESSIONS = st.recursive(
    _atoms(),
    lambda inner: st.one_of(
        st.builds(lambda a, b: f"({a}) AND ({b})", inner, inner),
        st.builds(lambda a, b: f"({a}) OR ({b})", inner, inner),
        st.builds(lambda a: f"NOT ({a})", inner),
    ),
    max_leaves=6,
)
_HEADERS = st.dictionaries(_NAMES, _VALUES)


def _encode(headers: dict[str, str | None]) -> list[tuple[str, bytes | None]]:
    return [(n, None if v is None else v.encode()) for n, v in headers.items()]


@settings(max_examples=100, deadline=None)
@given(_EXPRESSIONS, _EXPRESSIONS, _HEADERS)
def test_boolean_laws(a: str, b: str, headers: dict[str, str | None]) -> None:
    """De Morgan and commutativity hold in three-valued logic, as in SQL."""
    encoded = _encode(headers)

    def truth(text: str) -> bool:
        return parse(text).matches(None, encoded)

    assert truth(f"({a}) AND ({b})") == truth(f"({b}) AND ({a})")
    assert truth(f"NOT (({a}) OR ({b}))") == truth(f"(NOT ({a})) AND (NOT ({b}))")
    assert truth(f"NOT (({a}) AND ({b}))") == truth(f"(NOT ({a})) OR (NOT ({b}))")
    # a record matches at most one of a condition and its negation
    assert not (truth(a) and truth(f"NOT ({a})"))


@settings(max_examples=100, deadline=None)
@given(_NAMES, _LITERALS, _LITERALS, _HEADERS)
def test_between_is_two_comparisons(
    name: str, low: str, high: str, headers: dict[str, str | None]
) -> None:
    encoded = _encode(headers)
    between = parse(f"{name} BETWEEN {low} AND {high}").matches(None, encoded)
    assert between == parse(f"{name} >= {low} AND {name} <= {high}").matches(None, encoded)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_any_text_parses_or_fails_with_a_position(text: str) -> None:
    try:
        parse(text)
    except FilterSyntaxError as exc:
        assert 1 <= exc.position <= len(text) + 1
        assert f"at position {exc.position}" in str(exc)


# -- what a header index can rule out ----------------------------------------------------------

INDEXED = frozenset({"region", "tag"})


def _sets(**values: set[str | None]) -> tuple[tuple[str, frozenset[str | None]], ...]:
    return tuple(sorted((name, frozenset(v)) for name, v in values.items()))


@pytest.mark.parametrize(
    ("text", "sets", "may"),
    [
        ("region = 'eu'", _sets(region={"us", None}, tag=set()), False),
        ("region = 'eu'", _sets(region={"us", "eu"}, tag=set()), True),
        ("region IN ('eu', 'de')", _sets(region={"de"}, tag=set()), True),
        ("region IS NULL", _sets(region={"us"}, tag=set()), False),
        ("region IS NULL", _sets(region={"us", None}, tag=set()), True),
        # each ANDed condition on indexed headers must be possible
        ("region = 'eu' AND n > 3", _sets(region={"us"}, tag=set()), False),
        ("region = 'eu' AND n > 3", _sets(region={"eu"}, tag=set()), True),
        ("region = 'eu' AND tag = 'x'", _sets(region={"eu"}, tag={"y"}), False),
        # an OR over indexed headers is one condition
        ("region = 'eu' OR tag = 'x'", _sets(region={"us"}, tag={"y"}), False),
        ("region = 'eu' OR tag = 'x'", _sets(region={"us"}, tag={"x"}), True),
        # unindexed headers and the key leave the batch to be read
        ("region = 'eu' OR n > 3", _sets(region={"us"}, tag=set()), True),
        ("__key = 'k' AND NOT region = 'eu'", _sets(region={"eu"}, tag=set()), False),
        ("__key = 'k'", _sets(region={"eu"}, tag=set()), True),
    ],
)
def test_may_match_rules_out_only_impossible_batches(
    text: str, sets: tuple[tuple[str, frozenset[str | None]], ...], may: bool
) -> None:
    assert parse(text).may_match(sets, INDEXED) is may


def test_uses_index() -> None:
    assert parse("region = 'eu' AND n > 3").uses_index(INDEXED)
    assert not parse("region = 'eu' OR n > 3").uses_index(INDEXED)
    assert not parse("__key = 'k'").uses_index(INDEXED)
    assert not parse("n > 3").uses_index(INDEXED)


@settings(max_examples=100, deadline=None)
@given(_EXPRESSIONS, st.lists(_HEADERS, min_size=1, max_size=4))
def test_may_match_is_never_wrong_about_a_batch(
    text: str, records: list[dict[str, str | None]]
) -> None:
    """If a record of the batch matches, the index must not rule the batch out."""
    indexed = frozenset({"a", "b"})
    sets = tuple(
        sorted((name, frozenset(r.get(name) for r in records)) for name in sorted(indexed))
    )
    f = parse(text)
    if any(f.matches(None, _encode(r)) for r in records):
        assert f.may_match(sets, indexed)


@pytest.mark.parametrize(
    ("text", "sets", "verdict"),
    [
        ("region = 'eu'", _sets(region={"eu"}, tag=set()), EVERY_RECORD),
        ("region = 'eu'", _sets(region={"eu", None}, tag=set()), SOME_RECORDS),
        ("region = 'eu'", _sets(region={"us"}, tag=set()), NO_RECORD),
        ("region = 'eu' AND tag IN ('a', 'b')", _sets(region={"eu"}, tag={"a", "b"}), EVERY_RECORD),
        ("region = 'eu' AND n > 1", _sets(region={"eu"}, tag=set()), SOME_RECORDS),
        ("region = 'eu' OR n > 1", _sets(region={"eu"}, tag=set()), SOME_RECORDS),
        ("TRUE", _sets(region={"eu"}, tag=set()), EVERY_RECORD),
    ],
)
def test_classify_says_when_every_record_matches(
    text: str, sets: tuple[tuple[str, frozenset[str | None]], ...], verdict: int
) -> None:
    assert parse(text).classify(sets, INDEXED) == verdict


@settings(max_examples=100, deadline=None)
@given(_EXPRESSIONS, st.lists(_HEADERS, min_size=1, max_size=4))
def test_classify_is_never_wrong_about_a_batch(
    text: str, records: list[dict[str, str | None]]
) -> None:
    """NO_RECORD only if none matches, EVERY_RECORD only if all do."""
    indexed = frozenset({"a", "b", "c"})
    sets = tuple(
        sorted((name, frozenset(r.get(name) for r in records)) for name in sorted(indexed))
    )
    f = parse(text)
    matching = [f.matches(None, _encode(r)) for r in records]
    verdict = f.classify(sets, indexed)
    if verdict == NO_RECORD:
        assert not any(matching)
    if verdict == EVERY_RECORD:
        assert all(matching)
