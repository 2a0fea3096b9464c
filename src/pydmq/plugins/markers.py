"""The pluggy markers of the ``pydmq`` project; plugins import ``hookimpl`` from here."""

import pluggy

__all__ = ["PROJECT_NAME", "hookimpl", "hookspec"]

PROJECT_NAME = "pydmq"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
