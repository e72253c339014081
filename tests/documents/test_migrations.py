"""Data migrations of the documents app, run on PostgreSQL from the state before them."""

import uuid

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE_SEARCHABLE = ("documents", "0012_connectors_moved")
SEARCHABLE = ("documents", "0013_document_searchable_version")


def migrate(target, *also):
    """Migrate to `target`; the models as they are there, and as the apps of the
    migrations `also` name are there."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([target])
    return executor.loader.project_state([target, *also]).apps


@pytest.fixture(autouse=True)
def _migrated_to_the_end_after():
    """Every later test expects the schema of every migration, those after the one tried
    here included (taking 0012 back unapplies what depends on it)."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def _document(apps, organisation, name: str, *, version: int = 1, deleted: bool = False):
    Document = apps.get_model("documents", "Document")
    return Document.objects.create(
        organisation=organisation,
        filename=name,
        kind="pdf",
        size_bytes=1,
        sha256=uuid.uuid4().hex * 2,
        storage_key=f"test/{uuid.uuid4()}.pdf",
        version=version,
        chunk_count=99,  # whatever the embed stage recorded, before the migration
        deleted_at="2026-01-01T00:00:00Z" if deleted else None,
    )


def _chunks(apps, document, version: int, count: int) -> None:
    Chunk = apps.get_model("documents", "Chunk")
    for index in range(count):
        Chunk.objects.create(
            id=uuid.uuid5(document.id, f"v{version}/chunk/{index}"),
            document=document,
            version=version,
            index=index,
            text="text",
            embedding=b"\0\0\0\0",
            embedding_model="m",
        )


def _charged(apps, document, version: int) -> None:
    apps.get_model("documents", "UsageEntry").objects.create(
        organisation=document.organisation, document=document, document_version=version, pages=1
    )


def test_the_backfill_makes_searchable_exactly_the_versions_that_were_charged():
    apps = migrate(BEFORE_SEARCHABLE)
    try:
        organisation = apps.get_model("documents", "Organisation").objects.create(
            slug="acme", name="Acme", page_limit=100
        )
        # Its run succeeded: charged, with its chunks.
        settled = _document(apps, organisation, "settled.pdf")
        _chunks(apps, settled, 1, 3)
        _charged(apps, settled, 1)
        # Cancelled half way through embed: chunks written, nothing charged.
        cancelled = _document(apps, organisation, "cancelled.pdf")
        _chunks(apps, cancelled, 1, 2)
        # A connected file whose version 2 has not settled: version 1 stays searchable,
        # the chunks of version 2 that were written are not.
        edited = _document(apps, organisation, "edited.pdf", version=2)
        _chunks(apps, edited, 1, 4)
        _chunks(apps, edited, 2, 1)
        _charged(apps, edited, 1)
        # Charged, but its chunks were taken out of search (deleted at its source).
        taken_out = _document(apps, organisation, "taken-out.pdf")
        _charged(apps, taken_out, 1)
        # Deleted, with chunks that were left behind.
        deleted = _document(apps, organisation, "deleted.pdf", deleted=True)
        _chunks(apps, deleted, 1, 1)
        _charged(apps, deleted, 1)
    finally:
        apps = migrate(SEARCHABLE)

    Document = apps.get_model("documents", "Document")
    found = {
        d.filename: (d.searchable_version, d.chunk_count)
        for d in Document.objects.filter(organisation__slug="acme")
    }
    assert found == {
        "settled.pdf": (1, 3),
        "cancelled.pdf": (None, 0),
        "edited.pdf": (1, 4),
        "taken-out.pdf": (None, 0),
        "deleted.pdf": (None, 0),
    }


BEFORE_BOUND = ("documents", "0018_search_index")
BOUND = ("documents", "0019_apitoken_bound_to_maker")
ADMIN_LOG = ("admin", "0003_logentry_add_action_flag_choices")


def test_tokens_made_on_the_members_page_before_act_for_their_maker_after():
    apps = migrate(BEFORE_BOUND, ADMIN_LOG)
    try:
        organisation = apps.get_model("documents", "Organisation").objects.create(
            slug="acme", name="Acme", page_limit=100
        )
        User = apps.get_model("auth", "User")
        ada, olga = User.objects.create(username="ada"), User.objects.create(username="olga")
        ApiToken = apps.get_model("documents", "ApiToken")

        def token(name: str, maker) -> int:
            return ApiToken.objects.create(
                organisation=organisation,
                name=name,
                prefix=name[:6],
                token_hash=uuid.uuid4().hex * 2,
                created_by=maker,
                role="admin",
            ).id

        on_the_page = token("page", ada)
        in_the_admin = token("admin", olga)
        by_command = token("command", None)
        kind = apps.get_model("contenttypes", "ContentType").objects.get(
            app_label="documents", model="apitoken"
        )
        apps.get_model("admin", "LogEntry").objects.create(
            user=olga,
            content_type=kind,
            object_id=str(in_the_admin),
            object_repr="admin",
            action_flag=1,
            change_message="Created; the secret was shown once.",
        )
    finally:
        apps = migrate(BOUND)

    tokens = apps.get_model("documents", "ApiToken").objects
    bound = dict(tokens.values_list("id", "bound_to_maker"))
    assert bound == {on_the_page: True, in_the_admin: False, by_command: False}
