from django.core.management.base import BaseCommand, CommandError

from core.errors import ServiceError


class ServiceCommand(BaseCommand):
    """A command that reports a refused service call as a plain error, not a traceback."""

    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
