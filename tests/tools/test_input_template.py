"""`kafkalite produce -f`: rpk's input format, read line by line."""

from __future__ import annotations

import pytest

from kafkalite.tools.input_template import Message, TemplateError, compile_template


def test_key_and_value_split_at_the_first_literal() -> None:
    assert compile_template("%k %v").parse(b"a b c") == Message(value=b"b c", key=b"a")


def test_partition_headers_and_escapes() -> None:
    template = compile_template("%p\\t%h\\t%v")
    message = template.parse(b"3\ta=1,b=\tvalue")
    assert message == Message(value=b"value", partition=3, headers=[("a", b"1"), ("b", b"")])


def test_a_line_that_does_not_fit_is_refused() -> None:
    with pytest.raises(TemplateError, match="does not match"):
        compile_template("%k=%v").parse(b"no equals sign")
    with pytest.raises(TemplateError, match="not a number"):
        compile_template("%p %v").parse(b"x value")
    with pytest.raises(TemplateError, match="name=value"):
        compile_template("%h %v").parse(b"flag value")


@pytest.mark.parametrize(
    ("text", "reason"),
    [("%k", "no %v"), ("%v %v", "twice"), ("%k%v", "text between"), ("%k\\n%v", "between")],
)
def test_templates_that_cannot_be_read(text: str, reason: str) -> None:
    with pytest.raises(TemplateError, match=reason):
        compile_template(text)
