from django.apps import AppConfig


class ConnectorsConfig(AppConfig):
    name = "connectors"
    verbose_name = "Connected folders"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The pipeline never imports this app: it is handed what it calls for connected
        # folders here, once the apps are loaded.
        from django.db.models.signals import post_delete

        from connectors.services import (
            connection_syncs_prune_old,
            connections_pause_of_former_member,
            connections_pause_on_membership_deleted,
        )
        from connectors.source import ConnectedFolderSource
        from documents.models import Membership
        from documents.services.organisations import member_removed_register
        from pipeline.models import RunSource
        from pipeline.sources import source_register
        from pipeline.sweeper import sweeper_housekeeping_register

        source_register(RunSource.CONNECTOR, ConnectedFolderSource())
        sweeper_housekeeping_register("syncs pruned", connection_syncs_prune_old)
        # A member who leaves takes their connections' syncing with them: through
        # member_remove, and however else their membership is deleted (the row itself,
        # their account). Pausing twice pauses nothing more.
        member_removed_register(connections_pause_of_former_member)
        post_delete.connect(
            connections_pause_on_membership_deleted,
            sender=Membership,
            dispatch_uid="connectors.pause_on_membership_deleted",
        )
