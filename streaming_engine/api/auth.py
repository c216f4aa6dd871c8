"""The API's bearer token: secure by default.

SeaTunnel's REST API accepted job submissions from anyone who could reach
the port (CVE-2025-32896: a submitted job reads or runs what its plugins
allow). Here every request needs ``Authorization: Bearer <token>``:

- the token is generated on the server's first start (:func:`secrets.token_urlsafe`,
  256 bits) into a file only its owner can read (mode 0600, created with
  ``O_EXCL`` under a 0700 folder, never world-readable for an instant);
  there is no default token or password;
- a token file that others can read, or that another user owns, is refused
  (as ssh refuses a private key), and so is one too short to be a secret;
- comparisons are constant-time (:func:`hmac.compare_digest`).

The default file is ``<checkpoint.dir>/_api/token`` when the engine's
checkpoint root is a local path, else ``~/.streaming-engine/api-token``;
``--token-file`` names another. A client on the same machine (``run --async``,
``list``) reads the same file.
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from pathlib import Path

from streaming_engine.errors import EngineError

TOKEN_BYTES = 32  # token_urlsafe(32): 43 characters, 256 bits
MIN_TOKEN_LENGTH = 32  # a token file written by hand must be at least this long


def default_token_file(checkpoint_dir: str) -> Path:
    """Where the server keeps its token unless ``--token-file`` says otherwise."""
    if "://" in checkpoint_dir and not checkpoint_dir.startswith("file://"):
        return Path.home() / ".streaming-engine" / "api-token"  # an object store is no place for a 0600 file
    local = checkpoint_dir[len("file://"):] if checkpoint_dir.startswith("file://") else checkpoint_dir
    return Path(local).expanduser().absolute() / "_api" / "token"


def load_or_create(path: Path) -> tuple[str, bool]:
    """The token in ``path``, created when the file does not exist: (token, created)."""
    path = Path(path)
    if not path.exists():
        _make_parent(path.parent)
        token = secrets.token_urlsafe(TOKEN_BYTES)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except FileExistsError:  # another server created it meanwhile: use that one
            return read(path), False
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(token + "\n")
        return token, True
    return read(path), False


def read(path: Path) -> str:
    """The token of an existing file, refused when others could read it, another user owns it, or it is short."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise EngineError("API.TOKEN_FILE", {"path": str(path), "detail": "it does not exist; start "
                                             "'streaming-engine serve' once to create it, or pass --token-file"}) from None
    if not stat.S_ISREG(st.st_mode):
        raise EngineError("API.TOKEN_FILE", {"path": str(path), "detail": "it is not a regular file"})
    if st.st_mode & 0o077:
        raise EngineError("API.TOKEN_FILE", {
            "path": str(path), "detail": f"its mode is {stat.S_IMODE(st.st_mode):04o}: others may read it; "
            f"run chmod 600 {path} (and consider the token leaked: delete the file to get a new one)"})
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        raise EngineError("API.TOKEN_FILE", {"path": str(path), "detail": f"it belongs to uid {st.st_uid}, not to "
                                             f"this user (uid {os.geteuid()})"})
    token = path.read_text(encoding="ascii", errors="replace").strip()
    if len(token) < MIN_TOKEN_LENGTH or any(c.isspace() for c in token):
        raise EngineError("API.TOKEN_FILE", {
            "path": str(path), "detail": f"it holds no token of at least {MIN_TOKEN_LENGTH} characters (one line, no "
            "spaces); delete it and the server generates one"})
    return token


def _make_parent(folder: Path) -> None:
    if folder.is_dir():
        return
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)


def matches(expected: str, authorization: str | None) -> bool:
    """True when an ``Authorization`` header carries the expected bearer token
    (constant time in the token's content)."""
    if not authorization:
        return False
    scheme, _, given = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode("utf-8", "replace"), expected.encode("utf-8"))
