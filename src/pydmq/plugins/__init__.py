"""Plugin wiring: hook specs, the typed PluginHost and the built-in plugin list."""

from pydmq.plugins.markers import hookimpl

__all__ = ["hookimpl"]
