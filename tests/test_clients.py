"""Client configs as each client documents them: ``config snippet``, ``config install`` / ``uninstall`` into
real files under a temporary $HOME, kept byte for byte around our entry; and ``doctor`` finding an entry that
no longer matches this install.

The expected shapes below are written out from the clients' documentation again (not read from
``kernel/cli/clients/facts.py``), so a wrong fact in that table fails here. No kernel runs: the commands run
in-process with click's runner, the URL being the configured one.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import json5
import pytest
from click.testing import CliRunner, Result

from foldermind.kernel.cli import cli
from foldermind.kernel.cli.clients import file as clientfile
from foldermind.kernel.cli.clients import jsonedit
from foldermind.kernel.cli.clients.facts import CLIENTS, TOKEN_ENV
from foldermind.protocol.runtime.client_keys import ClientKeys
from foldermind.protocol.runtime.home import Home, KernelLock
from foldermind.protocol.runtime.token_store import TokenStore

PORT = 53999
URL = f"http://127.0.0.1:{PORT}/mcp"

# The user-level file of each client on Linux, relative to $HOME.
USER_FILES = {
    "claude-desktop": ".config/Claude/claude_desktop_config.json",
    "claude-code": ".claude.json",
    "cursor": ".cursor/mcp.json",
    "zed": ".config/zed/settings.json",
    "vscode": ".config/Code/User/mcp.json",
    "windsurf": ".codeium/windsurf/mcp_config.json",
}
SERVERS_KEY = {"vscode": "servers", "zed": "context_servers"}
JSONC = {"zed", "vscode"}


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """A throw-away $HOME and foldermind home; the MCP port pinned so URLs are known."""
    user = tmp_path / "user"
    user.mkdir()
    monkeypatch.setenv("HOME", str(user))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("FOLDERMIND_MCP_PORT", str(PORT))
    yield user, tmp_path / "fm"


def run(fm: Path, *args: str, ok: bool = True) -> Result:
    result = CliRunner().invoke(cli, ["--home", str(fm), *args], catch_exceptions=False)
    if ok:
        assert result.exit_code == 0, (result.output, result.stderr)
    return result


def existing(path: Path, text: str) -> Path:
    """A config file the user already has."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def token(fm: Path) -> str:
    return TokenStore(Home.resolve(fm)).load_or_create()


def key_token(fm: Path, name: str) -> str:
    """Client key ``name``'s stored token (it must exist)."""
    tok = ClientKeys(Home.resolve(fm)).token(name)
    assert tok, name
    return tok


def key_names(fm: Path) -> list[str]:
    return [k.name for k in ClientKeys(Home.resolve(fm)).all()]


def parse(name: str, text: str) -> Any:
    """With that client's format's parser: JSON with comments for Zed and VS Code, strict JSON else."""
    return json5.loads(text) if name in JSONC else json.loads(text)


def command(fm: Path) -> tuple[str, list[str]]:
    exe = str(Path(sys.executable).parent / "foldermind")
    return exe, ["--home", str(fm), "mcp"]


def expected_stdio(name: str, fm: Path, key: str = "") -> dict[str, Any]:
    """The command entry, presenting client key ``key`` ("" the owner's token)."""
    exe, args = command(fm)
    args += ["--client", key] if key else []
    if name in ("claude-code", "vscode"):
        return {"type": "stdio", "command": exe, "args": args}
    if name == "zed":  # Zed's releases from June 2025 (zed-industries/zed#32793) refuse a command entry without it
        return {"source": "custom", "command": exe, "args": args}
    return {"command": exe, "args": args}


def expected_http(name: str, tok: str) -> dict[str, Any]:
    return {
        "claude-code": {"type": "http", "url": URL, "headers": {"Authorization": f"Bearer ${{{TOKEN_ENV}}}"}},
        "cursor": {"url": URL, "headers": {"Authorization": f"Bearer ${{env:{TOKEN_ENV}}}"}},
        "windsurf": {"serverUrl": URL, "headers": {"Authorization": f"Bearer ${{env:{TOKEN_ENV}}}"}},
        "vscode": {"type": "http", "url": URL, "headers": {"Authorization": "Bearer ${input:foldermind-token}"}},
        # Zed documents no env or secret reference in headers: the token itself.
        "zed": {"url": URL, "headers": {"Authorization": f"Bearer {tok}"}},
    }[name]


VSCODE_INPUT = {
    "type": "promptString",
    "id": "foldermind-token",
    "description": "foldermind bearer token (`foldermind token show`)",
    "password": True,
}


def ours(name: str, doc: dict[str, Any]) -> Any:
    return doc[SERVERS_KEY.get(name, "mcpServers")]["foldermind"]


def test_every_clients_snippet_parses_with_its_format_and_holds_the_documented_keys(env: tuple[Path, Path]) -> None:
    _, fm = env
    tok = token(fm)
    for name in CLIENTS:
        stdio = parse(name, run(fm, "config", "snippet", "--client", name, "--stdio").stdout)
        assert (ours(name, stdio)) == expected_stdio(name, fm), name
        default = parse(name, run(fm, "config", "snippet", "--client", name).stdout)
        assert default == stdio, f"{name}: the command form by default, as config install"
        if name == "claude-desktop":
            continue
        http = parse(name, run(fm, "config", "snippet", "--client", name, "--http").stdout)
        assert ours(name, http) == expected_http(name, tok), name
        assert set(http) == ({"servers", "inputs"} if name == "vscode" else {SERVERS_KEY.get(name, "mcpServers")})
    vscode = parse("vscode", run(fm, "config", "snippet", "--client", "vscode", "--http").stdout)
    assert vscode["inputs"] == [VSCODE_INPUT]


def test_each_snippet_offers_the_install_of_its_own_form(env: tuple[Path, Path]) -> None:
    # On main the URL form's snippet offered `config install --client zed`, which writes the command form.
    _, fm = env
    for name, form, install in (("zed", "--http", "--client zed --http"), ("cursor", "--stdio", "--client cursor")):
        said = run(fm, "config", "snippet", "--client", name, form).stderr
        line = next(x for x in said.splitlines() if x.startswith("# or let foldermind merge it in: "))
        assert line.endswith(f"config install {install}`"), line


def test_claude_desktop_gets_the_command_form_and_is_told_why_there_is_no_url_form(env: tuple[Path, Path]) -> None:
    _, fm = env
    default = run(fm, "config", "snippet", "--client", "claude-desktop")
    assert (ours("claude-desktop", json.loads(default.stdout))) == expected_stdio("claude-desktop", fm)
    assert "cannot reach 127.0.0.1" in default.stderr
    refused = run(fm, "config", "snippet", "--client", "claude-desktop", "--http", ok=False)
    assert refused.exit_code != 0 and "only the command form" in refused.stderr


def test_the_generic_snippet_gives_transport_url_header_and_command(env: tuple[Path, Path]) -> None:
    _, fm = env
    http = json.loads(run(fm, "config", "snippet", "--client", "generic", "--http").stdout)
    assert http == {"transport": "streamable-http", "url": URL, "headers": {"Authorization": f"Bearer {token(fm)}"}}
    stdio = json.loads(run(fm, "config", "snippet", "--client", "generic").stdout)
    exe, args = command(fm)
    assert stdio["transport"] == "stdio" and stdio["command"] == exe and stdio["args"] == args


def test_install_writes_each_clients_real_file_with_a_key_of_its_own_or_the_snippets_entry_with_owner_key(
    env: tuple[Path, Path],
) -> None:
    """By default the entry presents the client's own key (named after it, made once); ``--owner-key`` writes the
    snippet's entry, the owner's token; installing again moves it back onto the same key, never a second one."""
    user, fm = env
    tok = token(fm)
    for name, rel in USER_FILES.items():
        made = run(fm, "config", "install", "--client", name)
        assert f"client key {name!r} made; it sees every Smart Folder" in made.stderr
        assert ours(name, parse(name, (user / rel).read_text())) == expected_stdio(name, fm, key=name), name
        left = run(fm, "config", "install", "--client", name, "--owner-key").stderr
        assert ours(name, parse(name, (user / rel).read_text())) == expected_stdio(name, fm), name
        assert f"client key {name!r} is kept, though this entry no longer uses it" in " ".join(left.split()), left
        if name != "claude-desktop":
            run(fm, "config", "install", "--client", name, "--http")
            doc = parse(name, (user / rel).read_text())
            assert ours(name, doc) == expected_http(name, key_token(fm, name)), name
            shown = run(fm, "config", "install", "--client", name, "--http", "--owner-key")
            assert ours(name, parse(name, (user / rel).read_text())) == expected_http(name, tok), name
            if name != "zed":  # the token is referenced: the hint names the command printing it
                assert "token show" in shown.stderr and f"token show {name}" not in shown.stderr
                said = run(fm, "config", "install", "--client", name, "--http").stderr
                assert f"token show {name}" in " ".join(said.split()), said
                assert run(fm, "token", "show", name).stdout.strip() == key_token(fm, name)
        run(fm, "config", "install", "--client", name)
        assert ours(name, parse(name, (user / rel).read_text())) == expected_stdio(name, fm, key=name), name
    assert key_names(fm) == sorted(USER_FILES)
    assert parse("vscode", (user / USER_FILES["vscode"]).read_text())["inputs"] == [VSCODE_INPUT]


ZED_SETTINGS = """// Zed settings: mine, with comments
{
  "theme": "One Dark", // my theme
  "context_servers": {
    // the one I wrote by hand
    "other": {"command": "x", "args": [],}, // keep me
  },
  /* the end */
}
"""

VSCODE_MCP = """{
\t// workspace servers
\t"servers": {
\t\t"github": {
\t\t\t"type": "http",
\t\t\t"url": "https://api.githubcopilot.com/mcp/"
\t\t}
\t},
\t"inputs": [
\t\t{"type": "promptString", "id": "gh", "password": true} // gh token
\t]
}
"""

CURSOR_MCP = """{
    "mcpServers": {
        "a": {"command": "a"},
        "b": {
            "url": "https://example.com/mcp"
        }
    },
    "other": [1, 2, 3]
}
"""


def only_insertions(old: str, new: str) -> str:
    """What ``new`` adds to ``old``, asserting that nothing of ``old`` was changed or removed."""
    added = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        assert op in ("equal", "insert"), (op, old[i1:i2], new[j1:j2])
        if op == "insert":
            added.append(new[j1:j2])
    return "".join(added)


@pytest.mark.parametrize(
    ("name", "where", "original"),
    [
        ("zed", USER_FILES["zed"], ZED_SETTINGS),
        ("vscode", "proj/.vscode/mcp.json", VSCODE_MCP),
        ("cursor", USER_FILES["cursor"], CURSOR_MCP),
    ],
)
def test_install_into_a_file_with_other_servers_and_comments_keeps_them_byte_for_byte(
    env: tuple[Path, Path], name: str, where: str, original: str
) -> None:
    user, fm = env
    path = existing(user / where, original)
    project = ["--project", str(user / "proj")] if where.startswith("proj/") else []
    run(fm, "config", "install", "--client", name, "--http", *project)
    installed = path.read_text()
    added = only_insertions(original, installed)
    assert "foldermind" in added
    doc = parse(name, installed)
    before = parse(name, original)
    servers = SERVERS_KEY.get(name, "mcpServers")
    assert {k: v for k, v in doc[servers].items() if k != "foldermind"} == before[servers]
    assert {k: v for k, v in doc.items() if k not in (servers, "inputs")} == {
        k: v for k, v in before.items() if k not in (servers, "inputs")
    }
    if name == "vscode":
        assert doc["inputs"] == [*before["inputs"], VSCODE_INPUT]
    assert (path.parent / (path.name + ".foldermind.bak")).read_text() == original
    # Out again: the very bytes the user had.
    run(fm, "config", "uninstall", "--client", name, *project)
    assert path.read_text() == original


def test_install_twice_leaves_the_file_and_its_backup_alone_the_second_time(env: tuple[Path, Path]) -> None:
    user, fm = env
    path = existing(user / USER_FILES["cursor"], CURSOR_MCP)
    run(fm, "config", "install", "--client", "cursor")
    first = path.read_bytes()
    backup = path.parent / "mcp.json.foldermind.bak"
    stamp = backup.stat().st_mtime_ns, path.stat().st_mtime_ns
    again = run(fm, "config", "install", "--client", "cursor")
    assert "already" in again.stdout
    assert path.read_bytes() == first and (backup.stat().st_mtime_ns, path.stat().st_mtime_ns) == stamp
    assert backup.read_text() == CURSOR_MCP


@pytest.mark.parametrize(
    ("name", "text", "line", "column"),
    [
        ("cursor", '{\n  // Cursor reads strict JSON\n  "mcpServers": {}\n}\n', 2, 3),
        ("claude-desktop", '{"mcpServers": {"a": {"command": "a"},}}', 1, 39),
        ("zed", '{\n  "theme": "x"\n  "context_servers": {}\n}\n', 3, 3),
        ("vscode", '{"servers": [], }', 1, 13),
    ],
)
def test_a_file_that_does_not_parse_is_refused_with_line_and_column_and_left_untouched(
    env: tuple[Path, Path], name: str, text: str, line: int, column: int
) -> None:
    user, fm = env
    path = existing(user / USER_FILES[name], text)
    before = path.stat().st_mtime_ns
    refused = run(fm, "config", "install", "--client", name, ok=False)
    assert refused.exit_code == 1
    assert f"line {line}, column {column}" in refused.stderr and "nothing was changed" in refused.stderr
    assert path.read_text() == text and path.stat().st_mtime_ns == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    assert run(fm, "config", "uninstall", "--client", name, ok=False).exit_code == 1
    assert path.read_text() == text


def test_uninstall_takes_out_only_our_entry_and_our_vscode_input(env: tuple[Path, Path]) -> None:
    user, fm = env
    path = existing(user / USER_FILES["vscode"], VSCODE_MCP)
    run(fm, "config", "install", "--client", "vscode", "--http")
    run(fm, "config", "uninstall", "--client", "vscode")
    assert path.read_text() == VSCODE_MCP
    gone = run(fm, "config", "uninstall", "--client", "vscode")
    assert "already" in gone.stdout
    # A file holding nothing but ours keeps its servers object, empty.
    path.unlink()
    run(fm, "config", "install", "--client", "vscode", "--http")
    run(fm, "config", "uninstall", "--client", "vscode")
    assert json5.loads(path.read_text()) == {"servers": {}, "inputs": []}
    run(fm, "config", "install", "--client", "vscode")  # the command form names its key: uninstall says it stays
    said = " ".join(run(fm, "config", "uninstall", "--client", "vscode").stderr.split())
    assert "client key 'vscode' is kept" in said and "token revoke vscode" in said, said


def test_dry_run_prints_the_unified_diff_and_writes_nothing(env: tuple[Path, Path]) -> None:
    user, fm = env
    path = existing(user / USER_FILES["zed"], ZED_SETTINGS)
    out = run(fm, "config", "install", "--client", "zed", "--dry-run").stdout
    assert out.startswith(f"--- {path}\n+++ {path} (after)\n@@ ")
    assert '+    "foldermind": {' in out and not any(line.startswith("-") for line in out.splitlines()[2:])
    assert path.read_text() == ZED_SETTINGS and not (path.parent / "settings.json.foldermind.bak").exists()
    missing = user / USER_FILES["windsurf"]
    assert run(fm, "config", "install", "--client", "windsurf", "--dry-run").stdout.startswith("--- ")
    assert not missing.exists()
    # The URL form of a key not made yet shows a stand-in for its token; a dry run makes no key.
    tried = run(fm, "config", "install", "--client", "zed", "--http", "--dry-run")
    assert "<client key zed's token>" in tried.stdout and "would be made" in tried.stderr
    assert key_names(fm) == []


def test_project_forms_write_the_projects_own_file(env: tuple[Path, Path]) -> None:
    user, fm = env
    project = user / "proj"
    project.mkdir()
    for name, rel in (
        ("claude-code", ".mcp.json"),
        ("cursor", ".cursor/mcp.json"),
        ("vscode", ".vscode/mcp.json"),
        ("zed", ".zed/settings.json"),
    ):
        run(fm, "config", "install", "--client", name, "--project", str(project))
        # A key of the project's own, so the repository's agent can be scoped apart from the user-level entry.
        assert (ours(name, parse(name, (project / rel).read_text()))) == expected_stdio(name, fm, f"{name}-proj")
    for name in ("windsurf", "claude-desktop"):
        refused = run(fm, "config", "install", "--client", name, "--project", str(project), ok=False)
        assert refused.exit_code == 2 and "no project-level config file" in refused.stderr
    assert not (user / ".claude.json").exists()


def test_a_symlinked_config_is_edited_where_it_points_and_stays_a_link(env: tuple[Path, Path]) -> None:
    user, fm = env
    real = existing(user / "dotfiles" / "zed.json", ZED_SETTINGS)
    link = user / USER_FILES["zed"]
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    run(fm, "config", "install", "--client", "zed")
    assert link.is_symlink() and "foldermind" in real.read_text()
    assert (real.parent / "zed.json.foldermind.bak").read_text() == ZED_SETTINGS


def test_a_new_file_holding_the_token_itself_is_readable_by_its_owner_only(env: tuple[Path, Path]) -> None:
    user, fm = env
    run(fm, "config", "install", "--client", "zed", "--http")  # Zed: the token is written as is
    assert (user / USER_FILES["zed"]).stat().st_mode & 0o777 == 0o600
    run(fm, "config", "install", "--client", "cursor", "--http")  # Cursor: only ${env:...}
    assert (user / USER_FILES["cursor"]).stat().st_mode & 0o777 == 0o644


def test_an_existing_file_readable_by_others_is_made_owner_only_with_a_word_when_the_token_goes_in(
    env: tuple[Path, Path],
) -> None:
    user, fm = env
    path = existing(user / USER_FILES["zed"], ZED_SETTINGS)
    path.chmod(0o644)
    run(fm, "config", "install", "--client", "zed")  # the command form: no token, the mode is the user's
    assert path.stat().st_mode & 0o777 == 0o644
    tried = run(fm, "config", "install", "--client", "zed", "--http", "--dry-run")
    assert "would be made owner-only" in tried.stderr and path.stat().st_mode & 0o777 == 0o644
    installed = run(fm, "config", "install", "--client", "zed", "--http")
    assert key_token(fm, "zed") in path.read_text() and token(fm) not in path.read_text()
    assert path.stat().st_mode & 0o777 == 0o600
    assert (path.parent / (path.name + ".foldermind.bak")).stat().st_mode & 0o777 == 0o600
    said = " ".join(installed.stderr.split())
    assert "was readable by other users (mode 0644)" in said and "made it owner-only (0600)" in said, said
    assert "--client zed` (the command form) writes no token" in said
    # Loosened again by hand: installing again changes nothing in the file but says how to fix it.
    path.chmod(0o644)
    again = " ".join(run(fm, "config", "install", "--client", "zed", "--http").stderr.split())
    assert f"chmod 600 {path}" in again and path.stat().st_mode & 0o777 == 0o644


def test_the_claude_code_snippet_also_gives_claude_mcp_add_lines_that_read_the_token_when_run(
    env: tuple[Path, Path],
) -> None:
    _, fm = env
    http = run(fm, "config", "snippet", "--client", "claude-code", "--http").stderr
    line = next(x for x in http.splitlines() if x.startswith("# or run: claude mcp add"))
    words = shlex.split(line.removeprefix("# or run: "))
    assert words[:8] == ["claude", "mcp", "add", "--transport", "http", "--scope", "user", "foldermind"]
    assert words[8] == URL and words[9] == "--header" and words[10].startswith("Authorization: Bearer $(")
    assert token(fm) not in http
    stdio = run(fm, "config", "snippet", "--client", "claude-code", "--stdio").stderr
    line = next(x for x in stdio.splitlines() if x.startswith("# or run: claude mcp add"))
    exe, args = command(fm)
    assert shlex.split(line.removeprefix("# or run: ")) == [
        *["claude", "mcp", "add", "--scope", "user", "foldermind", "--"],
        *[exe, *args],
    ]


# -- the text edits themselves ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{}", '{\n  "mcpServers": {\n    "foldermind": {\n      "command": "f"\n    }\n  }\n}'),
        ('{"mcpServers": {}}', '{"mcpServers": {\n  "foldermind": {\n    "command": "f"\n  }\n}}'),
        (
            '{\n  "mcpServers": {\n    "a": {}\n  }\n}\n',
            '{\n  "mcpServers": {\n    "a": {},\n    "foldermind": {\n      "command": "f"\n    }\n  }\n}\n',
        ),
        ('{"x": 1}', '{"x": 1,\n  "mcpServers": {\n    "foldermind": {\n      "command": "f"\n    }\n  }}'),
    ],
)
def test_our_entry_is_inserted_indented_like_its_neighbours(text: str, expected: str) -> None:
    client = CLIENTS["cursor"]
    new = clientfile.with_entry(text, client, {"command": "f"}, None)
    assert new == expected and json.loads(new)["mcpServers"]["foldermind"] == {"command": "f"}
    # Out again: a servers object we made stays, empty.
    assert json.loads(clientfile.without_entry(new, client)) == {"mcpServers": {}, **json.loads(text)}


def test_a_changed_entry_is_replaced_in_place_and_a_duplicate_is_refused() -> None:
    client = CLIENTS["cursor"]
    text = '{\n  "mcpServers": {\n    "foldermind": {"command": "old"}, "b": {}\n  }\n}\n'
    new = clientfile.with_entry(text, client, {"command": "new"}, None)
    assert new == '{\n  "mcpServers": {\n    "foldermind": {\n      "command": "new"\n    }, "b": {}\n  }\n}\n'
    twice = '{"mcpServers": {"foldermind": {}, "foldermind": {}}}'
    with pytest.raises(jsonedit.JsonError, match="appears 2 times"):
        clientfile.with_entry(twice, client, {"command": "new"}, None)
    with pytest.raises(jsonedit.JsonError, match="not an object"):
        clientfile.with_entry('{"mcpServers": []}', client, {}, None)
    with pytest.raises(jsonedit.JsonError, match="top level"):
        clientfile.with_entry("[]", client, {}, None)


def test_a_windows_file_keeps_its_crlf_line_endings_in_and_out() -> None:
    client = CLIENTS["zed"]
    text = '{\r\n  "context_servers": {\r\n    "a": {} // mine\r\n  }\r\n}\r\n'
    new = clientfile.with_entry(text, client, {"command": "f"}, None)
    assert "\n" not in new.replace("\r\n", "") and json5.loads(new)["context_servers"]["foldermind"] == {"command": "f"}
    assert new == (
        '{\r\n  "context_servers": {\r\n    "a": {}, // mine\r\n'
        '    "foldermind": {\r\n      "command": "f"\r\n    }\r\n  }\r\n}\r\n'
    )
    assert clientfile.without_entry(new, client) == text


# -- doctor ------------------------------------------------------------------------------------------------


def doctor(fm: Path, project: Path) -> tuple[int, dict[str, dict[str, str]]]:
    result = run(fm, "doctor", "--json", "--project", str(project), ok=False)
    checks = json.loads(result.stdout)["checks"]
    by_name: dict[str, dict[str, str]] = {}
    for c in checks:  # a client with a user file and a project file has two checks: keep the worse
        if c["name"] not in by_name or c["status"] == "fail":
            by_name[c["name"]] = c
    return result.exit_code, by_name


def test_doctor_finds_an_entry_with_another_port_and_says_how_to_fix_it(
    env: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    user, fm = env
    monkeypatch.setenv(TOKEN_ENV, token(fm))
    run(fm, "config", "install", "--client", "cursor", "--http")
    entry = {"url": "http://127.0.0.1:1234/mcp", "headers": {"Authorization": f"Bearer {token(fm)}"}}
    existing(user / USER_FILES["zed"], json.dumps({"context_servers": {"foldermind": entry}}))
    code, checks = doctor(fm, user)
    assert code == 1
    assert checks["cursor"]["status"] == "ok", checks["cursor"]
    zed = checks["zed"]
    assert zed["status"] == "fail" and "http://127.0.0.1:1234/mcp" in zed["detail"] and URL in zed["detail"]
    assert zed["fix"].endswith("config install --client zed --http`")
    # Fixed as doctor says: all is well again.
    run(fm, "config", "install", "--client", "zed", "--http")
    code, checks = doctor(fm, user)
    assert checks["zed"]["status"] == "ok" and code == 0, checks


def test_doctor_passes_a_fresh_command_form_install_and_reports_the_rest(env: tuple[Path, Path]) -> None:
    user, fm = env
    run(fm, "config", "install", "--client", "claude-desktop")
    run(fm, "config", "install", "--client", "vscode", "--project", str(user))
    run(fm, "config", "install", "--client", "claude-code", "--project", str(user), "--owner-key")
    run(fm, "config", "install", "--client", "zed", "--project", str(user), "--http")
    code, checks = doctor(fm, user)
    assert code == 0, checks
    assert checks["claude-desktop"]["status"] == "ok"
    # A project's file with an unscoped key or the owner's token lets that repository's agent read every folder,
    # in either form: said, not failed.
    for name, who in (
        ("vscode", "client key 'vscode-user'"),
        ("claude-code", "the owner's token"),
        ("zed", "'zed-user'"),
    ):
        got = checks[name]
        assert got["status"] == "warn" and "sees every Smart Folder" in got["detail"] and who in got["detail"], got
        assert got["fix"].endswith("--folders ID_OR_NAME,...`"), got
    keys = checks["client keys"]
    assert keys["status"] == "info" and "3 client key(s)" in keys["detail"], keys
    assert "vscode-user (every folder)" in keys["detail"] and "zed-user (every folder)" in keys["detail"], keys
    assert checks["cursor"]["status"] == "info" and "no config file" in checks["cursor"]["detail"]
    assert checks["port"]["status"] == "ok" and str(PORT) in checks["port"]["detail"]
    assert checks["token"]["status"] == "info"  # the command form made no token
    assert checks["embedding model"]["status"] == "ok" and checks["disk"]["status"] in ("ok", "warn")
    assert checks["folders"]["status"] == "info"
    assert "config" not in checks  # no stray supervisor.toml, no word about one


def test_doctor_warns_of_a_supervisor_toml_left_at_the_top_of_the_home_where_nothing_reads_it(
    env: tuple[Path, Path],
) -> None:
    user, fm = env
    fm.mkdir()
    (fm / "supervisor.toml").write_text("[mcp]\nport = 1234\n")
    code, checks = doctor(fm, user)
    stray = checks["config"]
    assert stray["status"] == "warn" and "is not read" in stray["detail"]
    assert str(fm / "config" / "supervisor.toml") in stray["fix"] and code == 0  # a warning, not a failure


def test_doctor_fails_a_rotated_token_a_url_entry_in_claude_desktop_and_a_missing_command(
    env: tuple[Path, Path],
) -> None:
    user, fm = env
    old = token(fm)
    run(fm, "config", "install", "--client", "zed", "--http", "--owner-key")
    run(fm, "token", "rotate")
    assert token(fm) != old
    project = user / "proj"
    run(fm, "config", "install", "--client", "zed", "--http", "--project", str(project))
    run(fm, "token", "rotate", "zed-proj")  # the client key's file holds the old token now
    existing(user / USER_FILES["claude-desktop"], json.dumps({"mcpServers": {"foldermind": {"url": URL}}}))
    moved = {"command": "/nowhere/foldermind", "args": ["mcp"]}
    existing(user / USER_FILES["windsurf"], json.dumps({"mcpServers": {"foldermind": moved}}))
    code, checks = doctor(fm, user)
    assert code == 1
    assert checks["zed"]["status"] == "fail" and "not this install's" in checks["zed"]["detail"]
    _, in_project = doctor(fm, project)
    zed = in_project["zed"]
    assert zed["status"] == "fail" and str(project) in zed["detail"] and "not this install's" in zed["detail"], zed
    assert checks["claude-desktop"]["status"] == "fail" and "skips" in checks["claude-desktop"]["detail"]
    assert checks["windsurf"]["status"] == "fail" and "/nowhere/foldermind" in checks["windsurf"]["detail"]


def test_doctor_says_who_holds_a_taken_port(env: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    user, fm = env
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        monkeypatch.setenv("FOLDERMIND_MCP_PORT", str(port))
        _, checks = doctor(fm, user)
    assert checks["port"]["status"] == "warn" and f"port {port} is taken" in checks["port"]["detail"]
    assert f"pid {os.getpid()}" in checks["port"]["detail"]


def test_doctor_takes_port_0_as_the_os_picking_one_not_as_a_port_to_free(
    env: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    user, fm = env
    monkeypatch.setenv("FOLDERMIND_MCP_PORT", "0")
    _, checks = doctor(fm, user)
    assert checks["port"]["status"] == "info" and "port = 0 lets the OS pick" in checks["port"]["detail"]
    # A kernel serving on the port the OS gave it: the real home lock held, and mcp.json as the front door writes it.
    home = Home.resolve(fm)
    lock = KernelLock(home)
    assert lock.acquire()
    try:
        home.write_mcp_info({"url": "http://127.0.0.1:41234/mcp", "port": 41234, "state": "running", "error": ""})
        _, checks = doctor(fm, user)
    finally:
        lock.release()
    port = checks["port"]
    assert port["status"] == "ok" and "serves http://127.0.0.1:41234/mcp" in port["detail"], port
    assert "free port" not in port.get("fix", "")


def test_the_warning_about_claude_codes_own_state_comes_only_with_the_user_file_it_concerns(
    env: tuple[Path, Path],
) -> None:
    user, fm = env
    project = user / "proj"
    project.mkdir()
    into_project = run(fm, "config", "install", "--client", "claude-code", "--project", str(project))
    assert "own state" not in into_project.stderr
    into_user_file = run(fm, "config", "install", "--client", "claude-code")
    assert "~/.claude.json is also Claude Code's own state" in into_user_file.stderr
