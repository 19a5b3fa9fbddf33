"""The admin CLI's bad input: one line on stderr and exit code 2, checked before any broker is
contacted; a broker that does not answer: one line naming the address and exit code 1."""

from __future__ import annotations

import base64
import io
import json
import socket
import subprocess
import time
from importlib.metadata import version
from pathlib import Path

import pytest

from compat.cli_runner import kafkalite, kafkalite_here, ok, ok_json, one_line_error
from kafkalite.cli import main
from kafkalite.tools.consume import as_json
from kafkalite.tools.progress import Progress

NOWHERE = "127.0.0.1:9"  # discard port: nothing listens


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


BAD_ARGUMENTS = [
    ["topic"],
    ["topic", "frobnicate"],
    ["topic", "create"],
    ["topic", "create", "t", "-p", "0"],
    ["topic", "create", "t", "-r", "x"],
    ["topic", "create", "t", "-c", "novalue"],
    ["topic", "list", "--format", "xml"],
    ["topic", "describe"],
    ["topic", "alter-config", "t"],
    ["topic", "alter-config", "t", "-s", "a=1", "-d", "a"],
    ["topic", "add-partitions", "t"],
    ["topic", "add-partitions", "t", "--total", "-1"],
    ["topic", "delete"],
    ["group", "describe"],
    ["group", "reset-offsets", "g", "--to-earliest"],
    ["group", "reset-offsets", "g", "--all-topics"],
    ["group", "reset-offsets", "g", "--all-topics", "--to-earliest", "--to-latest"],
    ["group", "reset-offsets", "g", "--topic", "t:x", "--to-earliest"],
    ["group", "reset-offsets", "g", "--all-topics", "--to-offset", "-5"],
    ["group", "reset-offsets", "g", "--all-topics", "--to-datetime", "yesterday"],
    ["group", "delete"],
    ["produce"],
    ["produce", "t", "--acks", "2"],
    ["produce", "t", "-z", "brotli"],
    ["produce", "t", "-H", "nokey"],
    ["produce", "t", "-p", "-1"],
    ["produce", "t", "--file", "/nonexistent/lines.txt"],
    ["produce", "t", "-f", "%k"],
    ["produce", "t", "-f", "%k %v", "-K", ":"],
    ["consume"],
    ["consume", "t", "-o", "middle"],
    ["consume", "t", "-c", "0"],
    ["consume", "t", "--timestamp", "noon"],
    ["consume", "t", "-o", "end", "--from-beginning"],
    ["consume", "t", "-g", "g", "-p", "0"],
    ["cluster", "bogus"],
    ["cluster", "info", "--timeout", "0"],
    ["config", "get", "user", "x"],
    ["config", "get", "broker", "zero"],
    ["config", "set", "topic", "t"],
    ["config", "set", "topic", "t", "novalue"],
    ["topic", "list", "-X", "novalue"],
    ["topic", "list", "-X", "no.such.property=1"],
    ["produce", "t", "-X", "no.such.property=1"],
    ["consume", "t", "-X", "no.such.property=1"],
    ["acl"],
    ["acl", "add", "--allow-principal", "User:a", "--topic", "t"],
    ["acl", "add", "--allow-principal", "User:a", "--topic", "t", "--operation", "Frobnicate"],
    ["acl", "add", "--allow-principal", "alice", "--topic", "t", "--operation", "Read"],
    ["acl", "add", "--topic", "t", "--operation", "Read"],
    ["acl", "add", "--allow-principal", "User:a", "--operation", "Read"],
    ["acl", "add", "--allow-principal", "User:a", "--operation", "Read", "--topic", ""],
    ["acl", "add", "--deny-principal", "User:a", "--operation", "Read", "--topic", "t"]
    + ["--resource-pattern-type", "match"],
    ["acl", "list", "--principal", "a"],
    ["acl", "list", "--resource-pattern-type", "regex"],
    ["acl", "remove", "--allow-principal", "User:a", "--operation", "Read"],
    ["user"],
    ["user", "set-password"],
    ["user", "set-password", "u", "--mechanism", "SCRAM-SHA-1", "--password", "p"],
    ["user", "set-password", "u", "--iterations", "0", "--password", "p"],
    ["user", "set-password", "u", "--password", ""],
    ["user", "set-password", "", "--password", "p"],
    ["user", "delete"],
    ["user", "delete", "u", "--mechanism", "PLAIN"],
    ["quota"],
    ["quota", "set", "--producer-byte-rate", "100"],
    ["quota", "set", "--user", "u"],
    ["quota", "set", "--user", "u", "--producer-byte-rate", "0"],
    ["quota", "set", "--user", "u", "--consumer-byte-rate", "1.5"],
    ["quota", "set", "--user", "u", "--user-default", "--producer-byte-rate", "1"],
    ["quota", "set", "--user", "", "--producer-byte-rate", "1"],
    ["quota", "remove"],
    ["quota", "remove", "--client-id", "c", "--quota", "retention.ms"],
    ["quota", "set", "--user", "u", "--request-percentage", "-1"],
    ["quota", "list", "-X", "security.protocol=SASL_PLAINTEXT"],
]


@pytest.mark.parametrize("argv", BAD_ARGUMENTS, ids=" ".join)
def test_bad_arguments_exit_2_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Bad input is refused before any connection: the bootstrap points nowhere.
    with pytest.raises(SystemExit) as exit_info:
        code = main([*argv, "--bootstrap", NOWHERE] if len(argv) > 1 else argv)
        raise SystemExit(code)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kafkalite: "), captured.err


@pytest.mark.parametrize(
    "argv",
    [
        ["topic", "list"],
        ["topic", "create", "t"],
        ["group", "list"],
        ["produce", "t"],
        ["consume", "t"],
        ["cluster", "info"],
        ["config", "get", "topic", "t"],
    ],
    ids=" ".join,
)
def test_no_broker_answers_exit_1_naming_the_address(argv: list[str]) -> None:
    address = f"127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    result = kafkalite_here(*argv, "--bootstrap", address, "--timeout", "1", stdin="x\n")
    line = one_line_error(result, 1, address)
    assert "no answer" in line
    assert time.monotonic() - started < 30  # bounded by --timeout, never a hang


def test_a_real_process_exits_1_naming_the_address() -> None:
    address = f"127.0.0.1:{_closed_port()}"
    one_line_error(kafkalite("topic", "list", "-b", address, "--timeout", "1"), 1, address)


def test_bootstrap_from_env_then_profile_then_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--bootstrap beats $KAFKALITE_BOOTSTRAP, which beats the profile; all name the address."""
    env_address = f"127.0.0.1:{_closed_port()}"
    profile_address = f"127.0.0.1:{_closed_port()}"
    flag_address = f"127.0.0.1:{_closed_port()}"
    profile = tmp_path / "kafkalite" / "profile.toml"
    profile.parent.mkdir()
    profile.write_text(f'bootstrap = "{profile_address}"\ntimeout = 1\n')
    for name in ("KAFKALITE_BOOTSTRAP", "KAFKALITE_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    one_line_error(kafkalite_here("topic", "list"), 1, profile_address, "within 1s")
    monkeypatch.setenv("KAFKALITE_BOOTSTRAP", env_address)
    one_line_error(kafkalite_here("topic", "list"), 1, env_address)
    one_line_error(kafkalite_here("topic", "list", "-b", flag_address), 1, flag_address)
    selected = tmp_path / "other.toml"
    selected.write_text('bootstrap = "127.0.0.1:1"\ntimeout = 1\n')
    monkeypatch.delenv("KAFKALITE_BOOTSTRAP")
    monkeypatch.setenv("KAFKALITE_PROFILE", str(selected))
    one_line_error(kafkalite_here("topic", "list"), 1, ":1 ")


def test_bad_profile_exit_2(tmp_path: Path) -> None:
    profile = tmp_path / "p.toml"
    profile.write_text("bootstrap = \n")
    one_line_error(kafkalite_here("topic", "list", "--profile", str(profile)), 2, "p.toml")
    profile.write_text('bootstrap = "x:1"\nbootstrapp = "y:1"\n')
    one_line_error(kafkalite_here("topic", "list", "--profile", str(profile)), 2, "bootstrapp")


def test_default_bootstrap_is_localhost_9092() -> None:
    result = kafkalite("cluster", "info", "--timeout", "1", env={"HOME": "/nonexistent"})
    if result.returncode == 0:  # something serves localhost:9092 on this machine
        assert ok_json(kafkalite("cluster", "info", "--format", "json"))["brokers"]
    else:
        one_line_error(result, 1, "localhost:9092")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_rate_and_eta_on_a_terminal_only() -> None:
    terminal = _Terminal()
    progress = Progress("bytes", total=4096, stream=terminal)
    progress.advance(1024)
    progress.close()
    line = terminal.getvalue().rsplit("\r\x1b[K", 1)[-1]
    assert line.startswith("[######..................]  25% 1.0 KiB ")
    assert "/s ETA " in line and line.endswith("\n")
    pipe = io.StringIO()
    quiet = Progress("msgs", total=10, stream=pipe)
    quiet.advance(10)
    quiet.close()
    assert pipe.getvalue() == ""


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"kafkalite {version('kafkalite')}\n"


class _Message:
    def __init__(self, key: bytes | None, value: bytes | None, headers: list) -> None:
        self._key, self._value, self._headers = key, value, headers

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 5

    def timestamp(self) -> tuple[int, int]:
        return 1, 1700000000000

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list:
        return self._headers


def test_consume_json_names_the_encoding_of_binary_data() -> None:
    """Bytes that are not UTF-8 come base64-encoded, named so (they were backslash escapes,
    which a reader cannot tell from text holding backslashes)."""
    binary = _Message(b"\xff\x00k", b"text \\xff", [("h", b"\x80"), ("n", b"1"), ("z", None)])
    assert json.loads(as_json(binary)) == {
        "topic": "t",
        "partition": 0,
        "offset": 5,
        "timestamp": 1700000000000,
        "key": base64.b64encode(b"\xff\x00k").decode(),
        "key_encoding": "base64",
        "value": "text \\xff",
        "value_encoding": "utf-8",
        "headers": [["h", "gA==", "base64"], ["n", "1"], ["z", None]],
    }
    tombstone = json.loads(as_json(_Message(None, None, [])))
    assert (tombstone["key"], tombstone["value"]) == (None, None)


_COMPLETE = """
source "$1"
complete_line() {
  COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )); _kafkalite; echo "${COMPREPLY[*]}"
}
complete_line kafkalite to
complete_line kafkalite topic cr
complete_line kafkalite topic create orders --part
complete_line kafkalite cluster h
complete_line kafkalite produce t --file kafkalite.b
"""


def test_bash_completion_follows_the_parser(tmp_path: Path) -> None:
    script = tmp_path / "kafkalite.bash"
    script.write_text(ok(kafkalite_here("completion", "bash")))
    driver = tmp_path / "complete.sh"
    driver.write_text(_COMPLETE)
    result = subprocess.run(
        ["bash", str(driver), str(script)], cwd=tmp_path, capture_output=True, text=True
    )
    assert (result.returncode, result.stderr) == (0, "")
    # No command word matches: file names (the last line).
    expected = ["topic", "create", "--partitions", "health", "kafkalite.bash"]
    assert result.stdout.splitlines() == expected
