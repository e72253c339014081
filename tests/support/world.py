"""An organisation with one of everything a route can name: a document and its run, a
connection with a file, API tokens, a direct upload, a webhook endpoint and a delivery.
The walks over every route fill path parameters from it."""

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.test import Client
from django.utils import timezone

from connectors.models import ConnectorImport
from documents.models import ApiToken, Organisation, PendingUpload
from documents.services.tokens import api_token_create
from pipeline.models import ImportRun
from pipeline.services.transitions import Actor
from tests.support.admin import make_connections
from tests.support.files import make_pdf
from tests.support.runs import drive
from tests.support.uploads import accepted_run
from webhooks.models import WebhookDelivery, WebhookEndpoint
from webhooks.services import endpoint_create, endpoint_test_send


@dataclass
class World:
    organisation: Organisation
    api: Client
    # A token of the organisation that no client uses: safe to revoke.
    spare_token: ApiToken
    run: ImportRun
    connector_import: ConnectorImport
    upload: PendingUpload
    endpoint: WebhookEndpoint
    delivery: WebhookDelivery
    # Words only this organisation's pages and answers may show.
    secrets: tuple[str, ...]

    def values(self) -> dict[str, str]:
        """Path parameter name -> this organisation's object."""
        return {
            "run_id": str(self.run.id),
            "document_id": str(self.run.document_id),
            "connection_id": str(self.connector_import.connection_id),
            "import_id": str(self.connector_import.id),
            "token_id": str(self.spare_token.id),
            "upload_id": str(self.upload.id),
            "endpoint_id": str(self.endpoint.id),
            "delivery_id": str(self.delivery.id),
            # A webhook endpoint's button.
            "action": "test",
            # A page of its document (it has two).
            "number": "1",
        }


def world(organisation: Organisation, *, processed: bool = False) -> World:
    """`processed`: the run driven through every stage (only in a transactional test: the
    stages commit), so that it has attempts, a ledger entry and chunks too."""
    _, raw = api_token_create(organisation=organisation, name=f"{organisation.slug} client")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    spare, _ = api_token_create(organisation=organisation, name=f"{organisation.slug} spare")
    secret_name = f"{organisation.slug}-confidential-minutes.pdf"
    run = accepted_run(api, make_pdf(2), name=secret_name)
    if processed:
        run = drive(run.id)
    [connection] = make_connections(organisation, 1)
    connection.folder_path = f"/srv/{organisation.slug}-private-folder"
    connection.save(update_fields=["folder_path"])
    connector_import = ConnectorImport.objects.get(connection=connection)
    now = timezone.now()
    upload = PendingUpload.objects.create(
        organisation=organisation,
        storage_key=f"uploads/{uuid.uuid4()}",
        filename=f"{organisation.slug}-pending-contract.pdf",
        kind="pdf",
        content_type="application/pdf",
        size_bytes=1000,
        expires_at=now + timedelta(minutes=15),
        complete_by=now + timedelta(hours=1),
    )
    endpoint, _ = endpoint_create(
        organisation=organisation,
        url=f"https://hooks.{organisation.slug}-private.example/in",
        events=["run.succeeded"],
        actor=Actor("walk", operator=True),
    )
    delivery = endpoint_test_send(endpoint=endpoint, actor=Actor("walk", operator=True))
    return World(
        organisation=organisation,
        endpoint=endpoint,
        delivery=delivery,
        api=api,
        spare_token=spare,
        run=run,
        connector_import=connector_import,
        upload=upload,
        secrets=(
            secret_name,
            str(run.id),
            str(run.document_id),
            connection.folder_path,
            upload.filename,
            str(upload.id),
            spare.prefix,
            endpoint.url,
            str(endpoint.id),
        ),
    )
