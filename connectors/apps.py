from django.apps import AppConfig


class ConnectorsConfig(AppConfig):
    name = "connectors"
    verbose_name = "Connected folders"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The pipeline never imports this app: it is handed what it calls for connected
        # folders here, once the apps are loaded.
        from connectors.services import (
            connection_syncs_prune_old,
            connections_pause_of_former_member,
        )
        from connectors.source import ConnectedFolderSource
        from documents.services.organisations import member_removed_register
        from pipeline.models import RunSource
        from pipeline.sources import source_register
        from pipeline.sweeper import sweeper_housekeeping_register

        source_register(RunSource.CONNECTOR, ConnectedFolderSource())
        sweeper_housekeeping_register("syncs pruned", connection_syncs_prune_old)
        # A member who leaves takes their connections' syncing with them.
        member_removed_register(connections_pause_of_former_member)
