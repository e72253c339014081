from django import forms
from django.contrib import admin

from documents.models import (
    ApiToken,
    Chunk,
    Document,
    Membership,
    Organisation,
    QuotaReservation,
    UsageEntry,
)
from documents.services.organisations import organisation_limit_error, organisation_set_limit


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class RecordAdmin(admin.ModelAdmin):
    """Records the pipeline keeps (documents, quota, ledger): viewed here, never edited
    or deleted by hand, which would leave held pages and the ledger out of step."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class OrganisationForm(forms.ModelForm):
    class Meta:
        model = Organisation
        fields = ["slug", "name", "page_limit"]

    def clean_page_limit(self):
        limit = self.cleaned_data["page_limit"]
        if self.instance.pk and (
            error := organisation_limit_error(organisation=self.instance, page_limit=limit)
        ):
            raise forms.ValidationError(error.message)
        return limit


@admin.register(Organisation)
class OrganisationAdmin(admin.ModelAdmin):
    form = OrganisationForm

    def save_model(self, request, obj, form, change):
        if not change:
            return super().save_model(request, obj, form, change)
        # Save only what the form changed: the page totals move under concurrent
        # uploads, and writing back the values loaded with the form would undo them.
        edited = [name for name in form.changed_data if name != "page_limit"]
        if edited:
            obj.save(update_fields=edited)
        if "page_limit" in form.changed_data:
            organisation_set_limit(organisation=obj, page_limit=obj.page_limit)

    list_display = ["slug", "name", "page_limit", "pages_used", "pages_reserved", "created_at"]
    search_fields = ["slug", "name"]
    readonly_fields = ["pages_used", "pages_reserved"]
    inlines = [MembershipInline]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "name", "organisation", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["organisation"]
    readonly_fields = ["prefix", "token_hash", "created_at", "last_used_at"]


@admin.register(Document)
class DocumentAdmin(RecordAdmin):
    list_display = ["filename", "organisation", "kind", "page_count", "chunk_count", "created_at"]
    list_filter = ["kind", "organisation"]
    search_fields = ["filename", "id", "sha256"]
    readonly_fields = [f.name for f in Document._meta.fields]


@admin.register(QuotaReservation)
class QuotaReservationAdmin(RecordAdmin):
    list_display = ["run", "organisation", "pages", "estimated", "status", "created_at"]
    list_filter = ["status", "organisation"]
    readonly_fields = [f.name for f in QuotaReservation._meta.fields]


@admin.register(UsageEntry)
class UsageEntryAdmin(RecordAdmin):
    list_display = ["organisation", "document", "document_version", "pages", "created_at"]
    list_filter = ["organisation"]
    readonly_fields = [f.name for f in UsageEntry._meta.fields]


@admin.register(Chunk)
class ChunkAdmin(RecordAdmin):
    list_display = ["document", "version", "index", "embedding_model"]
    readonly_fields = [f.name for f in Chunk._meta.fields]
