"""Sinks that write the driver's local file system: where a location is."""

from __future__ import annotations

import os
from urllib.parse import unquote, urlparse


def local_path(location: str) -> str | None:
    """The absolute local path of ``location`` (a plain path or a ``file:``
    URI, percent-decoded as Hadoop decodes it), or None for another scheme."""
    if location.startswith("file:"):
        return os.path.abspath(unquote(urlparse(location).path))
    if "://" in location:
        return None
    return os.path.abspath(location)
