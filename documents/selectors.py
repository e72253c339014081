"""Reads scoped to one organisation. Another organisation's ids are simply not found."""

import uuid

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from core.errors import NotFound
from documents.models import (
    ApiToken,
    Connection,
    Document,
    Organisation,
    PendingUpload,
    UsageEntry,
)


def document_list(*, organisation: Organisation) -> QuerySet[Document]:
    return Document.objects.filter(organisation=organisation).order_by("-created_at", "id")


def document_get(*, organisation: Organisation, document_id: uuid.UUID) -> Document:
    try:
        return Document.objects.get(organisation=organisation, id=document_id)
    except Document.DoesNotExist:
        raise NotFound("Document not found.") from None


def pending_upload_get(*, organisation: Organisation, upload_id: uuid.UUID) -> PendingUpload:
    try:
        return PendingUpload.objects.get(organisation=organisation, id=upload_id)
    except PendingUpload.DoesNotExist:
        raise NotFound("Upload not found.") from None


def organisations_for_user(*, user: AbstractBaseUser) -> QuerySet[Organisation]:
    return Organisation.objects.filter(memberships__user=user).order_by("slug")


def usage_entry_list(*, organisation: Organisation) -> QuerySet[UsageEntry]:
    """The organisation's page ledger, newest charge first."""
    return (
        UsageEntry.objects.filter(organisation=organisation)
        .select_related("document")
        .order_by("-created_at", "-id")
    )


def api_token_list(*, organisation: Organisation) -> QuerySet[ApiToken]:
    """The organisation's API tokens, revoked ones included, newest first."""
    return ApiToken.objects.filter(organisation=organisation).order_by("-created_at", "-id")


def connection_list(*, organisation: Organisation) -> QuerySet[Connection]:
    return Connection.objects.filter(organisation=organisation).order_by("-created_at", "-id")
