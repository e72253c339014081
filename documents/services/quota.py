"""Page quotas: atomic reservations at accept, one ledger entry at settle.

The organisation row carries the running totals; every change to them is a
single conditional UPDATE, so concurrent requests can never push
`pages_used + pages_reserved` above `page_limit` (a check constraint backs it).
"""

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from documents.errors import QuotaExceeded
from documents.models import Document, Organisation, QuotaReservation, UsageEntry


@dataclass(frozen=True)
class QuotaSnapshot:
    page_limit: int
    pages_used: int
    pages_reserved: int

    @property
    def pages_available(self) -> int:
        return max(self.page_limit - self.pages_used - self.pages_reserved, 0)


def quota_get(*, organisation_id: int) -> QuotaSnapshot:
    row = Organisation.objects.values("page_limit", "pages_used", "pages_reserved").get(
        id=organisation_id
    )
    return QuotaSnapshot(**row)


def _refuse(*, organisation_id: int, pages: int) -> QuotaExceeded:
    available = quota_get(organisation_id=organisation_id).pages_available
    return QuotaExceeded(
        f"This document needs {pages} pages but only {available} of your page quota are left.",
        pages_requested=pages,
        pages_available=available,
    )


def quota_check(*, organisation: Organisation, pages: int) -> None:
    """Refuse early, before any bytes are stored; `quota_reserve` is the real guard.

    Uses the organisation row as loaded with the request: a stale read only
    decides whether to try, never whether pages are taken.
    """
    if organisation.pages_available < pages:
        raise _refuse(organisation_id=organisation.id, pages=pages)


def _take(*, organisation_id: int, pages: int) -> bool:
    return (
        Organisation.objects.filter(
            id=organisation_id,
            page_limit__gte=F("pages_used") + F("pages_reserved") + pages,
        ).update(pages_reserved=F("pages_reserved") + pages)
        == 1
    )


def quota_reserve(*, run, pages: int, estimated: bool) -> QuotaReservation:
    """Hold `pages` for a run, or raise QuotaExceeded. Call inside the run's transaction."""
    if not _take(organisation_id=run.organisation_id, pages=pages):
        raise _refuse(organisation_id=run.organisation_id, pages=pages)
    return QuotaReservation.objects.create(
        organisation_id=run.organisation_id, run=run, pages=pages, estimated=estimated
    )


@dataclass(frozen=True)
class Settlement:
    entry: UsageEntry
    # False when this document version had been charged already (by an earlier run).
    charged: bool


@transaction.atomic
def quota_settle(*, run, document: Document, pages: int) -> Settlement:
    """Turn the run's reservation into one ledger entry for the actual page count.

    Idempotent: settling again returns the existing entry. A document version is
    charged at most once, whichever run settles it; a later run's reservation
    is released instead. Raises QuotaExceeded when the actual count is above
    the reservation and the difference no longer fits.
    """
    reservation = QuotaReservation.objects.select_for_update().get(run=run)
    existing = UsageEntry.objects.filter(
        organisation_id=run.organisation_id, document=document, document_version=document.version
    ).first()
    if reservation.status == QuotaReservation.Status.SETTLED:
        return Settlement(entry=existing, charged=False)
    if existing is not None:
        _release_locked(reservation)
        return Settlement(entry=existing, charged=False)
    if reservation.status == QuotaReservation.Status.RELEASED:
        # The hold was given back (cancel, sweep); charge only if the pages still fit.
        held = 0
    else:
        held = reservation.pages
    extra = pages - held
    updated = Organisation.objects.filter(
        id=run.organisation_id,
        page_limit__gte=F("pages_used") + F("pages_reserved") + max(extra, 0),
    ).update(pages_used=F("pages_used") + pages, pages_reserved=F("pages_reserved") - held)
    if updated != 1:
        raise _refuse(organisation_id=run.organisation_id, pages=extra)
    try:
        with transaction.atomic():
            entry = UsageEntry.objects.create(
                organisation_id=run.organisation_id,
                document=document,
                document_version=document.version,
                pages=pages,
                run=run,
            )
    except IntegrityError:
        # A concurrent settle of the same version won; undo our totals.
        Organisation.objects.filter(id=run.organisation_id).update(
            pages_used=F("pages_used") - pages, pages_reserved=F("pages_reserved") + held
        )
        _release_locked(reservation)
        entry = UsageEntry.objects.get(
            organisation_id=run.organisation_id,
            document=document,
            document_version=document.version,
        )
        return Settlement(entry=entry, charged=False)
    reservation.status = QuotaReservation.Status.SETTLED
    reservation.resolved_at = timezone.now()
    reservation.save(update_fields=["status", "resolved_at"])
    return Settlement(entry=entry, charged=True)


def _release_locked(reservation: QuotaReservation) -> bool:
    if reservation.status != QuotaReservation.Status.HELD:
        return False
    Organisation.objects.filter(id=reservation.organisation_id).update(
        pages_reserved=F("pages_reserved") - reservation.pages
    )
    reservation.status = QuotaReservation.Status.RELEASED
    reservation.resolved_at = timezone.now()
    reservation.save(update_fields=["status", "resolved_at"])
    return True


@transaction.atomic
def quota_release(*, run) -> bool:
    """Give a run's held pages back. Returns False if nothing was held (idempotent)."""
    reservation = QuotaReservation.objects.select_for_update().filter(run=run).first()
    if reservation is None:
        return False
    return _release_locked(reservation)


@transaction.atomic
def quota_rehold(*, run) -> QuotaReservation:
    """Hold a retried run's pages again if they were given back; QuotaExceeded if they no
    longer fit. A run whose pages are still held or already charged is left as it is."""
    reservation = QuotaReservation.objects.select_for_update().get(run=run)
    if reservation.status != QuotaReservation.Status.RELEASED:
        return reservation
    if not _take(organisation_id=run.organisation_id, pages=reservation.pages):
        raise _refuse(organisation_id=run.organisation_id, pages=reservation.pages)
    reservation.status = QuotaReservation.Status.HELD
    reservation.resolved_at = None
    reservation.save(update_fields=["status", "resolved_at"])
    return reservation
