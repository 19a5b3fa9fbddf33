"""The filter language of views: RocketMQ's SQL92 property-filter subset over record headers.

    region = 'eu' AND (priority >= 3 OR tag IN ('urgent', 'vip')) AND __key IS NOT NULL

Identifiers name headers (case-sensitive; letters, digits, `_`, `$`, `.`, or any name in
double quotes: "content-type"); `__key` is the record key. Values are the UTF-8 text of the
header (the last header of that name wins; a header with a null value is NULL). Literals:
'strings' ('' is a quote), numbers (-12, 3.5, 1e3), TRUE, FALSE. Operators: `=`, `<>`, `<`,
`<=`, `>`, `>=`, `[NOT] IN (...)`, `[NOT] BETWEEN ... AND ...`, `IS [NOT] NULL`, `AND`, `OR`,
`NOT`, parentheses; keywords in any case.

Comparisons are numeric when both sides are numbers (a numeric literal, or a value that reads
as one), textual when both are strings (a string literal, or any value compared with one).
A missing header is NULL; as in SQL, a comparison with NULL or between a number and a text
that is not one is UNKNOWN, and only TRUE matches: neither `a = 1` nor `NOT a = 1` matches a
record without header `a`.

Sans-IO: `parse` turns the text into a `Filter` (or raises `FilterSyntaxError`, whose
message names the 1-based position), whose `matches(key, headers)` decides one record and
`classify(value_sets, indexed)` a whole batch from a header index (the values each indexed
header takes in it): no record, some, or every record matches.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import product
from math import prod

KEY = "__key"
Headers = Sequence[tuple[str, bytes | None]]
Value = str | int | float | None  # a header's text or a literal; None is NULL
# Three-valued logic: True, False, None (UNKNOWN).
Truth = bool | None
Env = dict[str, str | None]
Eval = Callable[[Env], Truth]
Operand = Callable[[Env], Value]

KEYWORDS = frozenset({"AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL", "TRUE", "FALSE"})
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_IDENTIFIER = re.compile(r"[^\W\d][\w$.]*|\$[\w$.]*")
_HEADER_NUMBER = re.compile(r"\s*[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\s*")
_COMPARISONS = ("<=", ">=", "<>", "=", "<", ">")


class FilterSyntaxError(ValueError):
    """A filter that does not parse; `position` is 1-based (len + 1: at the end)."""

    def __init__(self, text: str, position: int, expected: str) -> None:
        self.position = position + 1
        found = text[position : position + 12]
        near = f"near '{found}'" if found else "at the end"
        super().__init__(f"{expected} at position {self.position} ({near})")


# -- lexer ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # "string" | "number" | "identifier" | "keyword" | "symbol" | "end"
    text: str  # the value: unquoted string, upper-cased keyword, identifier, symbol
    position: int  # 0-based start in the filter text


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            tokens.append(Token("end", "", pos))
            return tokens
        token, pos = _next_token(text, pos)
        tokens.append(token)


def _next_token(text: str, pos: int) -> tuple[Token, int]:
    char = text[pos]
    if char == "'":
        value, end = _quoted(text, pos, "'", "string")
        return Token("string", value, pos), end
    if char == '"':
        value, end = _quoted(text, pos, '"', "identifier")
        return Token("identifier", value, pos), end
    if char in "(),":
        return Token("symbol", char, pos), pos + 1
    for symbol in _COMPARISONS:
        if text.startswith(symbol, pos):
            return Token("symbol", symbol, pos), pos + len(symbol)
    if text.startswith("!=", pos):
        raise FilterSyntaxError(text, pos, "'!=' is not SQL: use '<>'")
    number = _NUMBER.match(text, pos)
    if number is not None:
        return Token("number", number.group(), pos), number.end()
    word = _IDENTIFIER.match(text, pos)
    if word is not None:
        upper = word.group().upper()
        if upper in KEYWORDS:
            return Token("keyword", upper, pos), word.end()
        return Token("identifier", word.group(), pos), word.end()
    raise FilterSyntaxError(text, pos, f"unexpected character {char!r}")


def _quoted(text: str, start: int, quote: str, what: str) -> tuple[str, int]:
    """The text between quotes (a doubled quote stands for one) and the position after."""
    out, pos = [], start + 1
    while pos < len(text):
        if text[pos] == quote:
            if text.startswith(quote * 2, pos):
                out.append(quote)
                pos += 2
                continue
            if what == "identifier" and not out:
                raise FilterSyntaxError(text, start, "empty quoted header name")
            return "".join(out), pos + 1
        out.append(text[pos])
        pos += 1
    raise FilterSyntaxError(text, start, f"unterminated quoted {what}")


# -- values and comparison -----------------------------------------------------------------------


def as_number(value: Value) -> int | float | None:
    """A number for numeric comparison: a numeric literal, or header text that reads as one."""
    if isinstance(value, int | float):
        return value
    if value is None or not _HEADER_NUMBER.fullmatch(value):
        return None
    stripped = value.strip()
    if any(c in stripped for c in ".eE"):
        return float(stripped)
    return int(stripped)


@dataclass(frozen=True, slots=True)
class _Side:
    """How an operand compares: a header (string, maybe numeric), or a typed literal."""

    evaluate: Operand
    is_header: bool


def compare(left: Value, right: Value, left_header: bool, right_header: bool) -> int | None:
    """-1, 0, 1, or None (UNKNOWN: NULL, or a number against a text that is not one)."""
    if left is None or right is None:
        return None
    if isinstance(left, str) and isinstance(right, str):
        if left_header and right_header:  # two headers: numeric if both read as numbers
            a, b = as_number(left), as_number(right)
            if a is not None and b is not None:
                return (a > b) - (a < b)
        return (left > right) - (left < right)
    a, b = as_number(left), as_number(right)
    if a is None or b is None:
        return None
    return (a > b) - (a < b)


_OUTCOMES: dict[str, Callable[[int], bool]] = {
    "=": lambda c: c == 0,
    "<>": lambda c: c != 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
}


def _comparison(op: str, left: _Side, right: _Side) -> Eval:
    outcome = _OUTCOMES[op]

    def evaluate(env: Env) -> Truth:
        order = compare(left.evaluate(env), right.evaluate(env), left.is_header, right.is_header)
        return None if order is None else outcome(order)

    return evaluate


def _not(inner: Eval) -> Eval:
    def evaluate(env: Env) -> Truth:
        value = inner(env)
        return None if value is None else not value

    return evaluate


def _and(parts: list[Eval]) -> Eval:
    def evaluate(env: Env) -> Truth:
        result: Truth = True
        for part in parts:
            value = part(env)
            if value is False:
                return False
            if value is None:
                result = None
        return result

    return evaluate


def _or(parts: list[Eval]) -> Eval:
    def evaluate(env: Env) -> Truth:
        result: Truth = False
        for part in parts:
            value = part(env)
            if value is True:
                return True
            if value is None:
                result = None
        return result

    return evaluate


def _in(subject: _Side, choices: list[_Side]) -> Eval:
    equals = [_comparison("=", subject, choice) for choice in choices]
    return _or(equals)


def _between(subject: _Side, low: _Side, high: _Side) -> Eval:
    return _and([_comparison(">=", subject, low), _comparison("<=", subject, high)])


def _is_null(subject: _Side) -> Eval:
    return lambda env: subject.evaluate(env) is None


# -- parser --------------------------------------------------------------------------------------


class _Parser:
    """Recursive descent: or -> and -> not -> predicate."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.index = 0
        self.names: set[str] = set()
        # The names each open sub-expression reads (for the root's conjuncts).
        self._reading: list[set[str]] = []
        self.conjuncts: list[tuple[Eval, frozenset[str]]] = []

    @property
    def token(self) -> Token:
        return self.tokens[self.index]

    def fail(self, expected: str) -> FilterSyntaxError:
        return FilterSyntaxError(self.text, self.token.position, expected)

    def take(self, kind: str, text: str | None = None) -> Token | None:
        token = self.token
        if token.kind == kind and (text is None or token.text == text):
            self.index += 1
            return token
        return None

    def expect(self, kind: str, text: str, expected: str) -> None:
        if self.take(kind, text) is None:
            raise self.fail(expected)

    def parse(self) -> Eval:
        if self.token.kind == "end":
            raise self.fail("empty filter: expected a condition")
        evaluate = self.disjunction(root=True)
        if self.token.kind != "end":
            raise self.fail("expected AND, OR or the end of the filter")
        return evaluate

    def disjunction(self, root: bool = False) -> Eval:
        conjuncts: list[tuple[Eval, frozenset[str]]] = []
        parts = [self.conjunction(conjuncts)]
        while self.take("keyword", "OR"):
            parts.append(self.conjunction([]))
        evaluate = parts[0] if len(parts) == 1 else _or(parts)
        if root:  # the root is an AND of these conjuncts (an OR is one conjunct)
            self.conjuncts = conjuncts if len(parts) == 1 else [(evaluate, frozenset(self.names))]
        return evaluate

    def conjunction(self, conjuncts: list[tuple[Eval, frozenset[str]]]) -> Eval:
        parts = [self.reading(self.negation, conjuncts)]
        while self.take("keyword", "AND"):
            parts.append(self.reading(self.negation, conjuncts))
        return parts[0] if len(parts) == 1 else _and(parts)

    def reading(
        self, part: Callable[[], Eval], conjuncts: list[tuple[Eval, frozenset[str]]]
    ) -> Eval:
        """Parse `part`, noting it in `conjuncts` with the names it reads."""
        self._reading.append(set())
        evaluate = part()
        conjuncts.append((evaluate, frozenset(self._reading.pop())))
        return evaluate

    def negation(self) -> Eval:
        if self.take("keyword", "NOT"):
            return _not(self.negation())
        return self.predicate()

    def predicate(self) -> Eval:
        if self.take("symbol", "("):
            inner = self.disjunction()
            self.expect("symbol", ")", "expected ')'")
            return inner
        if self.take("keyword", "TRUE"):
            return lambda env: True
        if self.take("keyword", "FALSE"):
            return lambda env: False
        subject = self.operand("expected a condition (a header name, a value or '(')")
        return self.condition(subject)

    def condition(self, subject: _Side) -> Eval:
        token = self.token
        if token.kind == "symbol" and token.text in _OUTCOMES:
            self.index += 1
            other = self.operand(f"expected a value after {token.text}")
            return _comparison(token.text, subject, other)
        if self.take("keyword", "IS"):
            negated = self.take("keyword", "NOT") is not None
            self.expect("keyword", "NULL", "expected NULL after IS" + (" NOT" if negated else ""))
            test = _is_null(subject)
            return _not(test) if negated else test
        negated = self.take("keyword", "NOT") is not None
        if self.take("keyword", "IN"):
            test = _in(subject, self.choices())
        elif self.take("keyword", "BETWEEN"):
            low = self.operand("expected a value after BETWEEN")
            self.expect("keyword", "AND", "expected AND in BETWEEN ... AND ...")
            test = _between(subject, low, self.operand("expected a value after AND"))
        elif negated:
            raise self.fail("expected IN or BETWEEN after NOT")
        else:
            raise self.fail("expected a comparison (=, <>, <, <=, >, >=, IN, BETWEEN or IS)")
        return _not(test) if negated else test

    def choices(self) -> list[_Side]:
        self.expect("symbol", "(", "expected '(' after IN")
        choices = [self.literal("expected a string or number in the IN list")]
        while self.take("symbol", ","):
            choices.append(self.literal("expected a string or number after ','"))
        self.expect("symbol", ")", "expected ',' or ')' in the IN list")
        return choices

    def literal(self, expected: str) -> _Side:
        token = self.token
        if token.kind not in ("string", "number"):
            raise self.fail(expected)
        return self.operand(expected)

    def operand(self, expected: str) -> _Side:
        token = self.token
        if token.kind == "identifier":
            self.index += 1
            name = token.text
            self.names.add(name)
            for reading in self._reading:
                reading.add(name)
            return _Side(lambda env: env.get(name), True)
        if token.kind == "string":
            self.index += 1
            text = token.text
            return _Side(lambda env: text, False)
        if token.kind == "number":
            self.index += 1
            number = as_number(token.text)
            return _Side(lambda env: number, False)
        raise self.fail(expected)


MEMO_LIMIT = 4096  # distinct (key, header values) remembered per filter
NO_RECORD, SOME_RECORDS, EVERY_RECORD = 0, 1, 2  # of a batch that matches, by its index


def _outcomes(
    evaluate: Eval, names: frozenset[str], sets: dict[str, frozenset[str | None]]
) -> set[Truth] | None:
    """What `evaluate` gives over every combination of the headers' values (None: more
    than MAX_COMBINATIONS of them)."""
    order = sorted(names)
    choices = [sorted(sets.get(name, frozenset({None})), key=str) for name in order]
    if prod(len(c) for c in choices) > MAX_COMBINATIONS:
        return None
    return {evaluate(dict(zip(order, combo, strict=True))) for combo in product(*choices)}


MAX_COMBINATIONS = 256  # header value combinations tried per conjunct and batch
# Per header, the values a batch holds (None: a record lacks it or has a null value).
ValueSets = tuple[tuple[str, frozenset[str | None]], ...]


class Filter:
    """A parsed filter: a record matches only when the condition is TRUE.

    `match` (the data path) takes the raw values of the headers it names, `header_names`,
    and remembers its answers per distinct values (headers such as tags repeat)."""

    def __init__(
        self,
        text: str,
        names: frozenset[str],
        evaluate: Eval,
        conjuncts: Sequence[tuple[Eval, frozenset[str]]] = (),
    ) -> None:
        self.text = text
        self._conjuncts = tuple(conjuncts)  # the root is their AND
        self._classified: dict[tuple[ValueSets, frozenset[str]], int] = {}
        self.names = names  # the headers it reads (and __key)
        self.reads_key = KEY in names
        self.header_names = frozenset(n.encode() for n in names if n != KEY)
        self._evaluate = evaluate
        self._order = tuple(sorted(self.header_names))
        self._memo: dict[tuple[bytes | None, ...], bool] = {}

    def matches(self, key: bytes | None, headers: Headers) -> bool:
        """Does a record with this key and these headers (last one of a name wins) match?"""
        names = self.header_names
        values = {n: v for name, v in headers if (n := name.encode()) in names}
        return self.match(key, values)

    def match(self, key: bytes | None, values: dict[bytes, bytes | None]) -> bool:
        order = self._order
        if len(order) == 1 and not self.reads_key:  # the common case: one header
            memo_key: tuple[bytes | None, ...] = (values.get(order[0]),)
        else:
            memo_key = tuple(values.get(name) for name in order)
            if self.reads_key:
                memo_key += (key,)
        found = self._memo.get(memo_key)
        if found is None:
            found = self._decide(key, values)
            if len(self._memo) >= MEMO_LIMIT:
                self._memo.clear()
            self._memo[memo_key] = found
        return found

    def uses_index(self, indexed: frozenset[str]) -> bool:
        """Can a header index of `indexed` rule batches out for this filter?"""
        return any(names <= indexed and KEY not in names for _, names in self._conjuncts)

    def may_match(self, value_sets: ValueSets, indexed: frozenset[str]) -> bool:
        """Could a record of a batch whose indexed headers take these values match? False
        only when a condition the filter ANDs, reading indexed headers only, is TRUE for no
        combination of the values (each record's values are one of the combinations)."""
        return self.classify(value_sets, indexed) != NO_RECORD

    def classify(self, value_sets: ValueSets, indexed: frozenset[str]) -> int:
        """NO_RECORD, SOME_RECORDS (read the batch to know) or EVERY_RECORD of a batch whose
        indexed headers take these values matches. EVERY_RECORD needs every condition the
        filter ANDs to read indexed headers only and to be TRUE for every combination."""
        memo_key = (value_sets, indexed)
        found = self._classified.get(memo_key)
        if found is None:
            found = self._classify(dict(value_sets), indexed)
            if len(self._classified) >= MEMO_LIMIT:
                self._classified.clear()
            self._classified[memo_key] = found
        return found

    def _classify(self, sets: dict[str, frozenset[str | None]], indexed: frozenset[str]) -> int:
        every = bool(self._conjuncts)
        for evaluate, names in self._conjuncts:
            if not names <= indexed or KEY in names:
                every = False
                continue
            outcomes = _outcomes(evaluate, names, sets)
            if outcomes is None:  # too many combinations to try
                every = False
            elif True not in outcomes:
                return NO_RECORD
            elif outcomes != {True}:
                every = False
        return EVERY_RECORD if every else SOME_RECORDS

    def _decide(self, key: bytes | None, values: dict[bytes, bytes | None]) -> bool:
        env: Env = {
            name.decode(): None if value is None else value.decode("utf-8", "replace")
            for name, value in values.items()
        }
        if self.reads_key:
            env[KEY] = None if key is None else key.decode("utf-8", "replace")
        return self._evaluate(env) is True


def parse(text: str) -> Filter:
    """The filter `text` states; raises FilterSyntaxError naming the position."""
    parser = _Parser(text)
    evaluate = parser.parse()
    return Filter(text, frozenset(parser.names), evaluate, parser.conjuncts)
