"""The HTTP storage API (FastAPI): ``create_app`` and the ``flowmem serve`` factory."""

from flowmem.api.app import app_from_env, create_app

__all__ = ["app_from_env", "create_app"]
