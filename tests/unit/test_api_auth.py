"""The REST API's token file and token check (no server, no Spark)."""

from __future__ import annotations

import os
import stat

import pytest

from streaming_engine.api import auth
from streaming_engine.errors import EngineError


def test_the_token_is_generated_once_into_an_owner_only_file(tmp_path):
    path = tmp_path / "ck" / "_api" / "token"
    token, created = auth.load_or_create(path)
    assert created and len(token) >= 43 and token.strip() == token
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    again, created_again = auth.load_or_create(path)
    assert (again, created_again) == (token, False)
    other, _ = auth.load_or_create(tmp_path / "other")
    assert other != token  # random, not a default


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_token_file_others_can_read_is_refused(tmp_path, mode):
    path = tmp_path / "token"
    path.write_text("x" * 50)
    os.chmod(path, mode)
    with pytest.raises(EngineError) as e:
        auth.read(path)
    assert e.value.condition == "API.TOKEN_FILE" and "chmod 600" in str(e.value)
    assert "x" * 50 not in str(e.value)


@pytest.mark.parametrize("content", ["", "short", "a" * 20 + " " + "b" * 20])
def test_a_token_file_without_a_long_token_is_refused(tmp_path, content):
    path = tmp_path / "token"
    path.write_text(content)
    os.chmod(path, 0o600)
    with pytest.raises(EngineError) as e:
        auth.read(path)
    assert e.value.condition == "API.TOKEN_FILE"


def test_a_missing_token_file_says_how_to_get_one(tmp_path):
    with pytest.raises(EngineError) as e:
        auth.read(tmp_path / "nope")
    assert "streaming-engine serve" in str(e.value)


def test_only_the_exact_bearer_token_matches():
    token = "t" * 43
    assert auth.matches(token, f"Bearer {token}") and auth.matches(token, f"bearer  {token} ")
    for header in (None, "", token, f"Basic {token}", f"Bearer {token}x", f"Bearer {token[:-1]}", "Bearer ",
                   f"Bearer {token.upper()}", f"Token {token}"):
        assert not auth.matches(token, header), header


def test_the_default_token_file_is_next_to_a_local_checkpoint_root_and_never_on_an_object_store(tmp_path):
    assert auth.default_token_file(str(tmp_path / "ck")) == tmp_path / "ck" / "_api" / "token"
    assert auth.default_token_file(f"file://{tmp_path}/ck") == tmp_path / "ck" / "_api" / "token"
    s3 = auth.default_token_file("s3a://bucket/ck")
    assert "s3a" not in str(s3) and s3.name == "api-token"
