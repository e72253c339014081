"""What every admin list shares: records shown but never edited by hand, and lists that
stay fast on big tables (FastListAdmin): no exact counts of whole tables, filters that
never list a whole table, searches that read keys and indexes."""

from functools import cached_property

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.core.paginator import EmptyPage, PageNotAnInteger, Paginator
from django.db import connections
from django.db.models import QuerySet

from core.text import ascii_number
from documents.models import Organisation


class RecordAdmin(admin.ModelAdmin):
    """Records the pipeline keeps (documents, quota, ledger, imports): viewed here, never edited
    or deleted by hand, which would leave held pages and the ledger out of step."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def table_estimate(queryset: QuerySet) -> int | None:
    """PostgreSQL's own estimate of a table's rows (kept by ANALYZE and autovacuum),
    or None before the table was first analysed."""
    connection = connections[queryset.db]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reltuples FROM pg_class WHERE oid = %s::regclass",
            [queryset.model._meta.db_table],
        )
        row = cursor.fetchone()
    return int(row[0]) if row and row[0] >= 0 else None


class BoundedCountPaginator(Paginator):
    """Counts at most COUNT_CAP rows of a filtered list, and takes PostgreSQL's estimate
    for an unfiltered table larger than that: an exact count of 100,000 rows, on every
    page view, is the slowest part of a Django admin list. The pages shown stop at the
    cap; later ones are still reachable by their number (?p=)."""

    COUNT_CAP = 10_000

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.count_is_estimate = False
        self.count_is_capped = False

    @cached_property
    def count(self) -> int:
        queryset = self.object_list
        if not queryset.query.where:
            estimate = table_estimate(queryset)
            if estimate is not None and estimate > self.COUNT_CAP:
                self.count_is_estimate = True
                return estimate
        # Only the keys: the list's computed columns need not be computed to be counted.
        counted = queryset.order_by().values("pk")[: self.COUNT_CAP + 1].count()
        if counted > self.COUNT_CAP:
            self.count_is_capped = True
            return self.COUNT_CAP
        return counted

    def validate_number(self, number):
        if not (self.count_is_estimate or self.count_is_capped):
            return super().validate_number(number)
        try:
            number = int(number)
        except (TypeError, ValueError):
            raise PageNotAnInteger("That page number is not an integer") from None
        if number < 1:
            raise EmptyPage("That page number is less than 1")
        return number


class BoundedChangeList(ChangeList):
    """Django shows a list that fits on one page without a LIMIT; PostgreSQL then plans
    for every row the filter might match (and may spend seconds compiling that plan
    with JIT). The page is sliced in every case. The admin's `list_defer` columns are
    left in the database."""

    def get_queryset(self, request, exclude_parameters=None):
        queryset = super().get_queryset(request, exclude_parameters)
        deferred = getattr(self.model_admin, "list_defer", ())
        return queryset.defer(*deferred) if deferred else queryset

    def get_results(self, request):
        super().get_results(request)
        if not self.result_list.query.is_sliced:
            self.result_list = self.result_list[: max(self.list_per_page, self.list_max_show_all)]


class FastListAdmin(admin.ModelAdmin):
    """Lists that stay fast on big tables: no exact counts, no facet counts. Related
    columns belong in `list_select_related`; large ones the list does not show, in
    `list_defer`."""

    paginator = BoundedCountPaginator
    # Rendering a row costs more than finding it: 50 rows keep a page quick.
    list_per_page = 50
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_defer: tuple[str, ...] = ()

    def get_changelist(self, request, **kwargs):
        return BoundedChangeList


class RelatedChoiceFilter(admin.SimpleListFilter):
    """A filter on a foreign key that lists the other table's rows only while there are
    at most CHOICES_SHOWN of them: Django's own lists every row, on every page view.
    Past that it lists the one chosen; the others are chosen from links (an
    organisation's page links to its ledger and tokens) or by their id in the URL."""

    CHOICES_SHOWN = 50
    field = ""  # the foreign key, e.g. "organisation"

    def labelled(self, queryset: QuerySet) -> list[tuple[str, str]]:
        """(id, label) for each row of `queryset`, in one query."""
        raise NotImplementedError

    def rows(self) -> QuerySet:
        raise NotImplementedError

    def lookups(self, request, model_admin):
        shown = self.labelled(self.rows()[: self.CHOICES_SHOWN + 1])
        if len(shown) <= self.CHOICES_SHOWN:
            return shown
        chosen = self.chosen_id()
        return self.labelled(self.rows().filter(id=chosen)) if chosen is not None else []

    def has_output(self):
        # A chosen row is applied even when it no longer exists (and matches nothing).
        return self.value() is not None or super().has_output()

    def chosen_id(self) -> int | None:
        value = self.value()
        return ascii_number(value) if value is not None else None

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        chosen = self.chosen_id()
        if chosen is None:
            return queryset.none()
        return queryset.filter(**{f"{self.field}_id": chosen})


class OrganisationFilter(RelatedChoiceFilter):
    title = "organisation"
    # Django's own name for it: links to filtered lists keep working.
    parameter_name = "organisation__id__exact"
    field = "organisation"

    def rows(self) -> QuerySet:
        return Organisation.objects.order_by("slug")

    def labelled(self, queryset):
        return [(str(id_), slug) for id_, slug in queryset.values_list("id", "slug")]
