"""Page quotas: atomic reservations at accept, one ledger entry at settle.

The organisation row carries the running totals; every change to them is a
single conditional UPDATE, so concurrent requests can never push
`pages_used + pages_reserved` above `page_limit` (a check constraint backs it).
A reservation holds pages for one piece of work; whoever does the work (an
import run) keeps a reference to it.

Each service is atomic on its own and, called inside a transaction, joins it without a
savepoint (a savepoint costs two statements on every stage): an error it raises must end
that transaction, as every caller lets it. The statements every document's stages make
(the quota read, the lock, the charge, the reservation's end) are written once
(core/selects.py, and SQL below): a queryset would cost more of a worker's CPU to build
than they take to run.
"""

from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from core.errors import QuotaExceeded
from core.selects import RowSelect
from documents.models import Document, Organisation, QuotaReservation, UsageEntry

Held = QuotaReservation.Status

_QUOTA = (
    f"SELECT page_limit, pages_used, pages_reserved FROM {Organisation._meta.db_table} "
    "WHERE id = %s"
)
_LOCKED = RowSelect(QuotaReservation, where="t.id = %s", for_update=True)
# Settling: the pages used go up by those charged and the held ones leave the reserved,
# only if what is charged beyond the hold still fits.
_CHARGE = (
    f"UPDATE {Organisation._meta.db_table} SET pages_used = pages_used + %s, "
    "pages_reserved = pages_reserved - %s "
    "WHERE id = %s AND page_limit >= pages_used + pages_reserved + %s"
)
_RESOLVE = (
    f"UPDATE {QuotaReservation._meta.db_table} SET status = %s, resolved_at = %s WHERE id = %s"
)


@dataclass(frozen=True)
class QuotaSnapshot:
    page_limit: int
    pages_used: int
    pages_reserved: int

    @property
    def pages_available(self) -> int:
        return max(self.page_limit - self.pages_used - self.pages_reserved, 0)


def quota_get(*, organisation_id: int) -> QuotaSnapshot:
    with connection.cursor() as cursor:
        cursor.execute(_QUOTA, [organisation_id])
        row = cursor.fetchone()
    if row is None:
        raise Organisation.DoesNotExist(f"organisation {organisation_id}")
    return QuotaSnapshot(*row)


def _refuse(*, organisation_id: int, pages: int) -> QuotaExceeded:
    available = quota_get(organisation_id=organisation_id).pages_available
    return QuotaExceeded(
        f"This document needs {pages} pages but only {available} of your page quota are left.",
        pages_requested=pages,
        pages_available=available,
    )


def quota_check(*, organisation: Organisation, pages: int) -> None:
    """Refuse early, before any bytes are stored; `quota_take` is the real guard.

    Uses the organisation row as loaded with the request: a stale read only
    decides whether to try, never whether pages are taken.
    """
    if organisation.pages_available < pages:
        raise _refuse(organisation_id=organisation.id, pages=pages)


# Taken on every upload: the statement as written, not a queryset built and compiled per call
# (0.5 ms of the web process's CPU against 0.1).
_TAKE_SQL = (
    f'UPDATE "{Organisation._meta.db_table}" SET pages_reserved = pages_reserved + %s '
    "WHERE id = %s AND page_limit >= pages_used + pages_reserved + %s"
)


def _take(*, organisation_id: int, pages: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(_TAKE_SQL, [pages, organisation_id, pages])
        return cursor.rowcount == 1


def quota_take(*, reservation: QuotaReservation) -> None:
    """Take a new reservation's pages from its organisation's quota, or raise
    QuotaExceeded. Call inside the transaction that writes the reservation and the work
    it is for (before or after this), so a refusal leaves nothing behind. The
    organisation's row stays locked until that transaction ends."""
    if not _take(organisation_id=reservation.organisation_id, pages=reservation.pages):
        raise _refuse(organisation_id=reservation.organisation_id, pages=reservation.pages)


def quota_hold_later(*, organisation_id: int) -> QuotaReservation:
    """An empty hold for work whose size is not known yet (a connector import before its
    bytes are fetched and counted); `quota_resize` sets its pages once they are."""
    return QuotaReservation.objects.create(organisation_id=organisation_id, pages=0, estimated=True)


@dataclass(frozen=True)
class Settlement:
    entry: UsageEntry
    # False when this document version had been charged already (by earlier work).
    charged: bool


def _locked(reservation: QuotaReservation) -> QuotaReservation:
    locked = _LOCKED.first([reservation.id])
    if locked is None:
        raise QuotaReservation.DoesNotExist(f"reservation {reservation.id}")
    return locked


@transaction.atomic(savepoint=False)
def quota_settle(*, reservation: QuotaReservation, document: Document, pages: int) -> Settlement:
    """Turn a reservation into one ledger entry for the actual page count.

    Idempotent: settling again returns the existing entry. A document version is
    charged at most once, whichever reservation settles it; a later one is
    released instead. Raises QuotaExceeded when the actual count is above the
    reservation and the difference no longer fits.
    """
    reservation = _locked(reservation)
    organisation_id = reservation.organisation_id
    version = {
        "organisation_id": organisation_id,
        "document": document,
        "document_version": document.version,
    }
    if reservation.status == Held.SETTLED:
        return Settlement(entry=UsageEntry.objects.filter(**version).first(), charged=False)
    entry = _charge_once(reservation=reservation, document=document, pages=pages)
    if entry is None:  # this version was charged by earlier work (or concurrent work won)
        _release_locked(reservation)
        return Settlement(entry=UsageEntry.objects.get(**version), charged=False)
    # A hold already given back (cancel, sweep) is charged only if the pages still fit.
    held = reservation.pages if reservation.status == Held.HELD else 0
    extra = pages - held
    with connection.cursor() as cursor:
        cursor.execute(_CHARGE, [pages, held, organisation_id, max(extra, 0)])
        updated = cursor.rowcount
    if updated != 1:
        raise _refuse(organisation_id=organisation_id, pages=extra)  # the entry goes too
    _resolve(reservation, Held.SETTLED)
    return Settlement(entry=entry, charged=True)


def _charge_once(*, reservation: QuotaReservation, document: Document, pages: int):
    """The ledger entry for this document version, if no entry holds it yet; else None.

    One statement (INSERT … ON CONFLICT DO NOTHING RETURNING):
    a concurrent insert of the same version makes it wait for that transaction's end,
    then insert nothing; no savepoint is needed to survive the conflict.
    """
    entry = UsageEntry(
        organisation_id=reservation.organisation_id,
        document=document,
        document_version=document.version,
        pages=pages,
        reservation=reservation,
        created_at=timezone.now(),
    )
    meta = UsageEntry._meta
    names = ("organisation", "document", "document_version", "pages", "reservation", "created_at")
    fields = [meta.get_field(name) for name in names]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {meta.db_table} ({', '.join(field.column for field in fields)}) "
            f"VALUES ({', '.join(['%s'] * len(fields))}) "
            "ON CONFLICT (organisation_id, document_id, document_version) DO NOTHING "
            "RETURNING id",
            # As the ORM would send them.
            [field.get_db_prep_save(getattr(entry, field.attname), connection) for field in fields],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    entry.id = row[0]
    entry._state.adding = False
    return entry


def _resolve(reservation: QuotaReservation, status: str) -> None:
    reservation.status = status
    reservation.resolved_at = None if status == Held.HELD else timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(_RESOLVE, [status, reservation.resolved_at, reservation.id])


def _release_locked(reservation: QuotaReservation) -> bool:
    if reservation.status != Held.HELD:
        return False
    Organisation.objects.filter(id=reservation.organisation_id).update(
        pages_reserved=F("pages_reserved") - reservation.pages
    )
    _resolve(reservation, Held.RELEASED)
    return True


@transaction.atomic(savepoint=False)
def quota_release(*, reservation: QuotaReservation) -> bool:
    """Give held pages back. Returns False if nothing was held (idempotent)."""
    return _release_locked(_locked(reservation))


@transaction.atomic(savepoint=False)
def quota_rehold(*, reservation: QuotaReservation) -> QuotaReservation:
    """Hold released pages again (work retried); QuotaExceeded if they no longer fit.
    A reservation still held or already charged is left as it is."""
    reservation = _locked(reservation)
    if reservation.status != Held.RELEASED:
        return reservation
    if not _take(organisation_id=reservation.organisation_id, pages=reservation.pages):
        raise _refuse(organisation_id=reservation.organisation_id, pages=reservation.pages)
    _resolve(reservation, Held.HELD)
    return reservation


@transaction.atomic(savepoint=False)
def quota_resize(
    *, reservation: QuotaReservation, pages: int, estimated: bool = False
) -> QuotaReservation:
    """Hold exactly `pages` for work whose real size is now known (after extraction):
    take the extra pages if they fit (else QuotaExceeded, and nothing changes), or give
    back what was held beyond them. A reservation no longer held is left as it is.
    `estimated`: the count is still a guess (a connector's DOCX before extraction)."""
    if reservation.pages == pages and reservation.estimated == estimated:
        # Nothing to change whatever its row says now (held, or no longer held): no lock.
        # Only the worker holding the run resizes its pages.
        return reservation
    reservation = _locked(reservation)
    if reservation.status != Held.HELD or (
        reservation.pages == pages and reservation.estimated == estimated
    ):
        return reservation
    extra = pages - reservation.pages
    if extra > 0 and not _take(organisation_id=reservation.organisation_id, pages=extra):
        raise _refuse(organisation_id=reservation.organisation_id, pages=pages)
    if extra < 0:
        Organisation.objects.filter(id=reservation.organisation_id).update(
            pages_reserved=F("pages_reserved") + extra
        )
    reservation.pages, reservation.estimated = pages, estimated
    reservation.save(update_fields=["pages", "estimated"])
    return reservation
