"""Commands the README gives to copy stay in step with what the project itself runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readmes_inspector_command_pins_the_version_the_tests_run() -> None:
    pinned = re.search(r"^INSPECTOR_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert pinned, "the Makefile pins the MCP Inspector"
    commands = re.findall(r"npx @modelcontextprotocol/inspector(\S*)", (ROOT / "README.md").read_text())
    assert commands and all(c == f"@{pinned[1]}" for c in commands), commands
