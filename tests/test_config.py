"""Config is declared once (``protocol/runtime/config/``); ``supervisor.toml`` is its rendering, and a home's
override is merged over the declared defaults."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from foldermind.protocol.runtime import config, defaults

REPO = Path(__file__).resolve().parents[1]


def test_the_committed_supervisor_toml_is_the_rendering_of_the_declared_defaults() -> None:
    committed = (REPO / "supervisor.toml").read_text(encoding="utf-8")
    assert committed == defaults.render(), "run: foldermind config defaults > supervisor.toml"


def test_the_rendered_file_loads_back_to_exactly_the_declared_defaults() -> None:
    data = tomllib.loads(defaults.render())
    assert config.SupervisorConfig.model_validate(data) == config.SupervisorConfig()


def test_every_setting_has_help_and_every_table_a_sentence() -> None:
    cfg = config.SupervisorConfig()
    assert type(cfg).model_fields["workers"].description
    for name in type(cfg).model_fields:
        if name == "workers":
            continue
        model = type(getattr(cfg, name))
        assert model.__doc__, name
        missing = [k for k, f in model.model_fields.items() if not (f.description or "").strip()]
        assert not missing, f"[{name}] keys without help: {missing}"
    assert all(f.description for f in config.WorkerSpec.model_fields.values())


def test_a_home_override_changes_only_its_keys_and_may_add_a_worker(tmp_path: Path) -> None:
    override = tmp_path / "supervisor.toml"
    override.write_text(
        '[search]\nfusion = "rrf"\n[workers.parser]\ncount = 1\n[workers.extra]\nmodule = "x.y"\n', encoding="utf-8"
    )
    cfg = config.load(override)
    base = config.SupervisorConfig()
    assert cfg.search.fusion == "rrf" and cfg.search.rrf_k == base.search.rrf_k
    assert cfg.workers["parser"].count == 1 and cfg.workers["parser"].nice == config.PROCESS_MAP["parser"].nice
    assert list(cfg.workers) == [*config.PROCESS_MAP, "extra"]
    assert config.load(tmp_path / "absent.toml") == base


def test_an_unknown_key_or_a_bad_value_in_an_override_is_an_error_naming_it(tmp_path: Path) -> None:
    override = tmp_path / "supervisor.toml"
    override.write_text("[search]\nfusoin = 'rrf'\n", encoding="utf-8")
    with pytest.raises(config.ConfigError, match="fusoin"):
        config.load(override)
    override.write_text("[mcp]\nport = 70000\n", encoding="utf-8")
    with pytest.raises(config.ConfigError, match="port"):
        config.load(override)


def test_a_key_an_older_version_read_is_an_error_naming_what_replaced_it(tmp_path: Path) -> None:
    override = tmp_path / "supervisor.toml"
    override.write_text("[ingest]\nparser_memory_mb = 1024\n", encoding="utf-8")
    with pytest.raises(config.ConfigError, match=r"parser_memory_mb is no longer read; set \[ingest\] parser_pool"):
        config.load(override)
    override.write_text("[ingest]\nparser_pool_memory_mb = 4096\n", encoding="utf-8")
    assert config.load(override).ingest.parser_pool_memory_mb == 4096


def test_config_defaults_prints_the_rendering() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "foldermind.kernel.cli", "config", "defaults"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == defaults.render()
