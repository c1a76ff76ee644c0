"""The MCP bearer token store, against the real file system and a real keyring backend.

The keyring is keyrings.alt's PlaintextKeyring chosen through PYTHON_KEYRING_BACKEND (as a user
would), writing under a per-test XDG_DATA_HOME; monkeypatch puts the environment back afterwards.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import pytest
from keyrings.alt.file import PlaintextKeyring  # type: ignore[import-untyped]

from foldermind.protocol.runtime.home import Home
from foldermind.protocol.runtime.token_store import SERVICE, TokenPersistError, TokenStore

PLAINTEXT = "keyrings.alt.file.PlaintextKeyring"
NO_STORE = "keyring.backends.fail.Keyring"


@pytest.fixture(autouse=True)
def _isolated_keyring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's own keyring config or secret store must never be read or written by these tests.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", NO_STORE)


@pytest.fixture
def home(tmp_path: Path) -> Home:
    return Home.resolve(tmp_path / "home")


def use_keyring(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", PLAINTEXT)


def keyring_value(store: TokenStore) -> str | None:
    value: str | None = PlaintextKeyring().get_password(SERVICE, store.username)
    return value


def assert_never_logged(caplog: pytest.LogCaptureFixture, *tokens: str) -> None:
    for record in caplog.records:
        for token in tokens:
            assert token not in record.getMessage()


# --- file mode ------------------------------------------------------------------------------------


def test_file_mode_creates_a_0600_token_and_says_so(home: Home, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    store = TokenStore(home)
    token = store.load_or_create()

    assert len(token) == 43
    assert store.mode == "file"
    assert store.current == token
    token_file = home.config_dir / "mcp-token"
    assert token_file.read_text() == token
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert (home.config_dir / "mcp-token.mode").read_text() == "file"
    assert any("no OS secret store; token stored in a 0600 file" in r.getMessage() for r in caplog.records)
    assert_never_logged(caplog, token)
    assert token not in os.environ.values()


def test_file_token_survives_new_instances(home: Home) -> None:
    token = TokenStore(home).load_or_create()
    assert TokenStore(home).load_or_create() == token
    assert TokenStore(home.config_dir).current == token


def test_rotate_persists_a_new_file_token(home: Home, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    store = TokenStore(home)
    old = store.load_or_create()
    new = store.rotate()

    assert new != old
    assert store.current == new
    assert TokenStore(home).load_or_create() == new
    assert stat.S_IMODE((home.config_dir / "mcp-token").stat().st_mode) == 0o600
    assert not [p.name for p in home.config_dir.iterdir() if p.name.endswith(".tmp")]
    assert_never_logged(caplog, old, new)


@pytest.mark.parametrize("garbage", [b"", b"short", b"\xff\xfe not ascii", b"x" * 43 + b"!"])
def test_garbage_file_gets_a_fresh_token(home: Home, garbage: bytes, caplog: pytest.LogCaptureFixture) -> None:
    home.config_dir.mkdir(parents=True)
    (home.config_dir / "mcp-token").write_bytes(garbage)
    (home.config_dir / "mcp-token.mode").write_text("file")

    token = TokenStore(home).load_or_create()

    assert len(token) == 43
    assert (home.config_dir / "mcp-token").read_text() == token
    assert TokenStore(home).load_or_create() == token
    assert any(r.levelno == logging.WARNING and "generated a new one" in r.getMessage() for r in caplog.records)


def test_loose_permissions_are_tightened(home: Home) -> None:
    token = TokenStore(home).load_or_create()
    token_file = home.config_dir / "mcp-token"
    os.chmod(token_file, 0o644)
    assert TokenStore(home).load_or_create() == token
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600


def test_rotate_failure_keeps_the_old_token_in_memory(home: Home) -> None:
    store = TokenStore(home)
    old = store.load_or_create()
    # A directory where the token file goes: the atomic replace fails for real.
    token_file = home.config_dir / "mcp-token"
    token_file.unlink()
    token_file.mkdir()

    with pytest.raises(TokenPersistError):
        store.rotate()

    assert store.current == old
    assert store.mode == "file"
    assert not [p.name for p in home.config_dir.iterdir() if p.name.endswith(".tmp")]


# --- keyring mode ---------------------------------------------------------------------------------


def test_keyring_mode_stores_no_file(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    use_keyring(monkeypatch)
    store = TokenStore(home)
    token = store.load_or_create()

    assert store.mode == "keyring"
    assert keyring_value(store) == token
    assert not (home.config_dir / "mcp-token").exists()
    assert (home.config_dir / "mcp-token.mode").read_text() == "keyring"
    assert TokenStore(home).load_or_create() == token
    # PlaintextKeyring kept it where XDG_DATA_HOME says, not in the user's real data folder.
    assert (Path(os.environ["XDG_DATA_HOME"]) / "python_keyring" / "keyring_pass.cfg").exists()


def test_keyring_rotate_persists(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    use_keyring(monkeypatch)
    store = TokenStore(home)
    old = store.load_or_create()
    new = store.rotate()
    assert new != old
    assert keyring_value(store) == new
    assert TokenStore(home).load_or_create() == new


def test_plaintext_token_moves_into_the_keyring(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    token = TokenStore(home).load_or_create()
    assert (home.config_dir / "mcp-token").exists()

    use_keyring(monkeypatch)
    store = TokenStore(home)
    assert store.load_or_create() == token

    assert store.mode == "keyring"
    assert keyring_value(store) == token
    assert not (home.config_dir / "mcp-token").exists()
    assert (home.config_dir / "mcp-token.mode").read_text() == "keyring"


def test_a_move_interrupted_after_deleting_the_file_still_finds_the_token(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = TokenStore(home).load_or_create()
    # What a crash between "delete the file" and "update the sidecar" leaves: keyring written, no file,
    # sidecar still "file".
    use_keyring(monkeypatch)
    probe = TokenStore(home)
    PlaintextKeyring().set_password(SERVICE, probe.username, token)
    (home.config_dir / "mcp-token").unlink()

    assert probe.load_or_create() == token
    assert (home.config_dir / "mcp-token.mode").read_text() == "keyring"


def test_a_move_interrupted_before_deleting_the_file_finishes_it(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    token = TokenStore(home).load_or_create()
    use_keyring(monkeypatch)
    probe = TokenStore(home)
    PlaintextKeyring().set_password(SERVICE, probe.username, token)

    assert probe.load_or_create() == token
    assert not (home.config_dir / "mcp-token").exists()


def test_lost_secret_store_gets_a_fresh_file_token(
    home: Home, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    use_keyring(monkeypatch)
    old = TokenStore(home).load_or_create()

    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", NO_STORE)
    store = TokenStore(home)
    new = store.load_or_create()

    assert new != old
    assert store.mode == "file"
    assert (home.config_dir / "mcp-token").read_text() == new
    assert (home.config_dir / "mcp-token.mode").read_text() == "file"
    assert any("no longer available" in r.getMessage() for r in caplog.records)


def test_keyring_that_lost_the_entry_gets_a_fresh_token(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    use_keyring(monkeypatch)
    store = TokenStore(home)
    old = store.load_or_create()
    PlaintextKeyring().delete_password(SERVICE, store.username)

    new = TokenStore(home).load_or_create()
    assert new != old
    assert keyring_value(store) == new


def test_rotate_failure_leaves_the_old_token_stored(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    store = TokenStore(home)
    old = store.load_or_create()  # file mode
    # A secret store appears whose storage cannot be written: rotate's write into it fails for real.
    use_keyring(monkeypatch)
    (Path(os.environ["XDG_DATA_HOME"]) / "python_keyring" / "keyring_pass.cfg").mkdir(parents=True)

    with pytest.raises(TokenPersistError):
        store.rotate()

    assert store.current == old
    assert store.mode == "file"
    assert (home.config_dir / "mcp-token").read_text() == old
    assert (home.config_dir / "mcp-token.mode").read_text() == "file"
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", NO_STORE)
    assert TokenStore(home).load_or_create() == old


def test_failed_move_into_the_keyring_keeps_serving_the_file_token(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    token = TokenStore(home).load_or_create()
    use_keyring(monkeypatch)
    (Path(os.environ["XDG_DATA_HOME"]) / "python_keyring" / "keyring_pass.cfg").mkdir(parents=True)

    store = TokenStore(home)
    assert store.load_or_create() == token
    assert store.mode == "file"
    assert (home.config_dir / "mcp-token").read_text() == token


# --- several homes, backend choice ----------------------------------------------------------------


@pytest.mark.parametrize("backend", [NO_STORE, PLAINTEXT])
def test_two_homes_get_different_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str) -> None:
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", backend)
    a, b = TokenStore(Home.resolve(tmp_path / "a")), TokenStore(Home.resolve(tmp_path / "b"))
    assert a.username != b.username
    token_a, token_b = a.load_or_create(), b.load_or_create()
    assert token_a != token_b
    assert TokenStore(Home.resolve(tmp_path / "a")).load_or_create() == token_a
    assert TokenStore(Home.resolve(tmp_path / "b")).load_or_create() == token_b


def test_unconfigured_low_priority_backend_is_not_a_secret_store(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    # With nothing configured keyring auto-picks keyrings.alt's plaintext file on a headless box;
    # that is no secret store, so the token goes to our own 0600 file.
    monkeypatch.delenv("PYTHON_KEYRING_BACKEND")
    import keyring.backend

    best = max(keyring.backend.get_all_keyring(), key=keyring.backend.by_priority)
    if best.priority >= 1:
        pytest.skip(f"this machine has a real secret store ({best!r})")
    store = TokenStore(home)
    store.load_or_create()
    assert store.mode == "file"


def test_backend_chosen_in_keyrings_config_file_counts(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHON_KEYRING_BACKEND")
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "python_keyring" / "keyringrc.cfg"
    config.parent.mkdir(parents=True)
    config.write_text(f"[backend]\ndefault-keyring={PLAINTEXT}\n")

    store = TokenStore(home)
    token = store.load_or_create()
    assert store.mode == "keyring"
    assert keyring_value(store) == token


def test_null_backend_configured_means_no_secret_store(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    # What `keyring --disable` writes: the user has switched keyring off.
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
    store = TokenStore(home)
    store.load_or_create()
    assert store.mode == "file"
