"""What keeps the pipeline's admin lists fast on big tables: filters that read indexes
and a search that hits keys for ids. The paginator that never counts a whole table is
FastListAdmin's, in operations/admin/organisations.py (the domain's lists use it too)."""

import uuid

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.utils import timezone

from documents.models import Document, Organisation
from operations.selectors import STUCK_KINDS, distinct_values, stuck_filter
from pipeline.models import ImportRun, StageAttempt

# --- Filters ---------------------------------------------------------------------------


class StuckFilter(admin.SimpleListFilter):
    title = "stuck"
    parameter_name = "stuck"

    def lookups(self, request, model_admin):
        return list(STUCK_KINDS.items())

    def queryset(self, request, queryset):
        kind = self.value()
        if kind in STUCK_KINDS:
            return queryset.filter(stuck_filter(kind))
        return queryset


class _DistinctValueFilter(admin.SimpleListFilter):
    """A filter whose choices are the distinct values of an indexed column, read by
    skipping through its index."""

    model = None
    field = ""

    def lookups(self, request, model_admin):
        return [(value, value) for value in distinct_values(self.model, self.field)]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(**{self.field: self.value()})
        return queryset


class ErrorCodeFilter(_DistinctValueFilter):
    title = "error code"
    parameter_name = "error_code"
    model = ImportRun
    field = "error_code"


class ErrorTypeFilter(_DistinctValueFilter):
    title = "error type"
    parameter_name = "error_type"
    model = StageAttempt
    field = "error_type"


# --- Search ----------------------------------------------------------------------------

HEX = set("0123456789abcdef")


def uuid_range(term: str) -> tuple[uuid.UUID, uuid.UUID] | None:
    """The ids a hex prefix (the start of a UUID, dashes allowed) covers, as a key range;
    None unless the term is one."""
    digits = term.lower().replace("-", "")
    if not 6 <= len(digits) <= 32 or not set(digits) <= HEX:
        return None
    return uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))


# Ids a search collects from another table before asking for runs; past this, the
# database gets the subquery instead (a broad match fills a page quickly anyway).
SEARCH_IDS_LIMIT = 1000


def _ids_or_subquery(queryset: QuerySet) -> list | QuerySet | None:
    """The ids (None when there are none), or the subquery when there are many."""
    ids = list(queryset[: SEARCH_IDS_LIMIT + 1])
    if len(ids) > SEARCH_IDS_LIMIT:
        return queryset
    return ids or None


def run_search(queryset: QuerySet, term: str) -> QuerySet:
    """Runs matching one search term.

    A whole UUID is the run's or its document's id (two index lookups). Anything else
    is an organisation slug or an error code (exact), part of a document name, of the
    run's error message or of an attempt's error (trigram indexes on PostgreSQL), or
    the start of a run or document id (6+ hex digits, as the list shows them).

    Matches on other tables are collected first (three indexed queries), so that every
    condition on runs is one the database answers from an index and it can combine
    them (a bitmap OR) instead of reading every run to test each one.
    """
    term = term.strip()
    if not term:
        return queryset
    try:
        value = uuid.UUID(term)
    except ValueError:
        pass
    else:
        return queryset.filter(Q(id=value) | Q(document_id=value))
    # `error_message <> ''` lets PostgreSQL use the partial trigram indexes.
    errors = ~Q(error_message="") & Q(error_message__icontains=term)
    matches = Q(error_code=term) | errors
    organisations = list(Organisation.objects.filter(slug=term).values_list("id", flat=True))
    if organisations:
        matches |= Q(organisation_id__in=organisations)
    documents = _ids_or_subquery(
        Document.objects.filter(filename__icontains=term).values_list("id", flat=True)
    )
    if documents is not None:
        matches |= Q(document_id__in=documents)
    attempts = _ids_or_subquery(
        StageAttempt.objects.filter(errors).order_by().values_list("run_id", flat=True)
    )
    if attempts is not None:
        matches |= Q(id__in=attempts)
    if bounds := uuid_range(term):
        matches |= Q(id__range=bounds) | Q(document__id__range=bounds)
    return queryset.filter(matches)


# --- Display ---------------------------------------------------------------------------


def local_time(value) -> str:
    """A time in the site's time zone, to the second."""
    if value is None:
        return "-"
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S")


def duration(seconds: float | None) -> str:
    """3d 4h, 2h 5m, 4m 10s, 12s, 0.35s."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.2f}s"
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"


def since(value) -> str:
    if value is None:
        return "-"
    return duration((timezone.now() - value).total_seconds())
