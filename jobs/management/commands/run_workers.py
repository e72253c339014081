from django.core.management.base import BaseCommand

from jobs.pipeline import STAGES
from jobs.supervisor import Supervisor, default_children


class Command(BaseCommand):
    help = (
        "Run every stage worker (with its configured concurrency), the scheduler, the sweeper "
        "and the connectors loop."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--concurrency",
            default="",
            help="per-stage worker counts, e.g. extract=3,embed=2 (defaults from settings)",
        )

    def handle(self, *args, concurrency, **options):
        counts = {}
        for item in filter(None, concurrency.split(",")):
            name, _, value = item.partition("=")
            counts[name.strip()] = int(value)
        children = default_children(concurrency=counts)
        summary = ", ".join(f"{s.name}x{counts.get(s.name, s.concurrency)}" for s in STAGES)
        self.stdout.write(f"Starting workers: {summary}, scheduler, sweeper, connectors")
        Supervisor(children).run()
