"""The one base class of every user error: a problem with the user's input that they can fix.

``idbench.cli.main`` turns any :class:`IdbenchError` into ``idbench <command>: error: <message>`` and
exit code 2, without a traceback; anything else is a bug and keeps its traceback. Each subclass also
keeps the built-in base it had before (``ValueError``, ``FileExistsError``, ...), so callers that catch
those still do.

This module sits at the bottom of the layering (pyproject.toml's import-linter contract): it imports
nothing of idbench, so every package may import it.
"""

from __future__ import annotations


class IdbenchError(Exception):
    """A user error: the message names the file, row or id at fault and what would be accepted.

    An error that carries several problems sets ``problems`` (one line each); the CLI prints their
    count and then one problem a line.
    """
