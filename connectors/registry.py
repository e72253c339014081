"""Which code serves a connection's provider (PROVIDERS)."""

from functools import cache

from django.utils.module_loading import import_string

from connectors.base import Provider, ProviderError
from connectors.models import Connection

# Where each provider's code lives (one more provider is one more line).
PROVIDERS = {
    "local": "connectors.local.LocalFolderProvider",
    "onedrive": "connectors.onedrive.OneDriveProvider",
}


@cache
def _provider(dotted: str) -> Provider:
    return import_string(dotted)()


def provider_for(connection: Connection) -> Provider:
    """The provider of `connection`; ProviderError if it is not installed here."""
    dotted = PROVIDERS.get(connection.provider)
    if not dotted:
        raise ProviderError(f"No connector is configured for {connection.provider}.")
    try:
        return _provider(dotted)
    except ImportError as exc:
        raise ProviderError(
            f"The {connection.get_provider_display()} connector is not available on this server."
        ) from exc
