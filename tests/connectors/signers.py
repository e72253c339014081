"""OneDrive connections as an admin of the organisation makes them: with their own
sign-in. A OneDrive connection reads with the sign-in of whoever connected it, and one
whose signer is not a member neither syncs nor fetches (connectors/selectors.py), so the
tests' connections have one."""

import time

from django.contrib.auth.models import AbstractBaseUser

from connectors.models import Connection
from documents.services.organisations import member_add
from tests.support.graph_server import DRIVE_ID, ROOT_ID, GraphServer


def signer(organisation) -> AbstractBaseUser:
    """The admin of `organisation` who connects its OneDrive folders in the tests."""
    return member_add(
        organisation=organisation, username=f"signer-{organisation.slug}", role="admin"
    )


def connected(
    graph: GraphServer,
    organisation,
    folder: str = "/Contracts",
    *,
    created_by: AbstractBaseUser | None = None,
    **token_args,
) -> Connection:
    """An organisation's OneDrive connection to `folder`, as if `created_by` (its
    `signer` unless said) had just connected it with their sign-in."""
    from connectors.onedrive_graph import Tokens
    from connectors.services import connection_connect_onedrive

    answer = graph.issue_tokens(**token_args)
    tokens = Tokens(
        access_token=answer["access_token"],
        refresh_token=answer["refresh_token"],
        expires_at=time.time() + answer["expires_in"],
    )
    return connection_connect_onedrive(
        organisation=organisation,
        drive_id=DRIVE_ID,
        folder_id=graph.folder(folder) if folder != "/" else ROOT_ID,
        folder_path=folder,
        credentials=tokens.as_dict(),
        created_by=created_by or signer(organisation),
    )
