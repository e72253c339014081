"""The operator's admin for the domain: organisations with their quota, ledger, members
and tokens; API tokens made and revoked only through the token services; the records
the pipeline keeps, read-only (operations/admin/listing.py keeps their lists fast)."""

import re
import secrets
import uuid

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpResponseRedirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse

from core.errors import ServiceError
from documents.models import (
    ApiToken,
    Chunk,
    Document,
    Membership,
    Organisation,
    QuotaReservation,
    UsageEntry,
)
from documents.selectors import api_token_list, usage_entry_list
from documents.services.organisations import (
    member_remove,
    organisation_limit_error,
    organisation_set_limit,
)
from documents.services.tokens import api_token_create, api_tokens_revoke
from operations.admin.listing import FastListAdmin, OrganisationFilter, RecordAdmin
from pipeline.services.reembed import documents_reembed
from pipeline.services.transitions import Actor
from pipeline.stages.ocr import languages_of, ocr_unavailable

# How many ledger entries and tokens an organisation's page shows; the rest are linked.
LEDGER_ROWS = 20
TOKEN_ROWS = 20


class MembershipInline(admin.TabularInline):
    """Members, added here; removed through `member_remove` (OrganisationAdmin.save_formset),
    so that what they set up stops with them."""

    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


def _filtered_changelist(model, organisation: Organisation) -> str:
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    return f"{url}?organisation__id__exact={organisation.id}"


def quota_bar(organisation: Organisation, *, compact: bool = False) -> str:
    """The quota as a bar (used, reserved, available of the limit) in plain HTML and CSS."""
    limit = organisation.page_limit

    def share(pages: int) -> str:
        # A string, so that no locale puts a decimal comma into the CSS.
        return f"{100 * pages / limit:.1f}" if limit else "0"

    return render_to_string(
        "admin/documents/organisation/quota_bar.html",
        {
            "compact": compact,
            "limit": limit,
            "used": organisation.pages_used,
            "reserved": organisation.pages_reserved,
            "taken": organisation.pages_used + organisation.pages_reserved,
            "available": organisation.pages_available,
            "used_share": share(organisation.pages_used),
            "reserved_share": share(organisation.pages_reserved),
        },
    )


class OrganisationForm(forms.ModelForm):
    class Meta:
        model = Organisation
        fields = ["slug", "name", "page_limit", "ocr_languages"]

    def clean_ocr_languages(self):
        chosen = self.cleaned_data["ocr_languages"].strip()
        if chosen and (problem := ocr_unavailable(languages_of(chosen))):
            raise forms.ValidationError(problem)
        return chosen

    def clean_page_limit(self):
        limit = self.cleaned_data["page_limit"]
        if self.instance.pk and (
            error := organisation_limit_error(organisation=self.instance, page_limit=limit)
        ):
            raise forms.ValidationError(error.message)
        return limit


# Runs one click of the action sends back to embed (each a transaction): the rest wait
# for the next click, so the page answers in seconds whatever the organisation's size.
REEMBED_PER_REQUEST = 1000


@admin.register(Organisation)
class OrganisationAdmin(admin.ModelAdmin):
    form = OrganisationForm
    list_display = ["slug", "name", "quota_compact", "page_limit", "created_at"]
    search_fields = ["slug", "name"]
    readonly_fields = ["quota", "pages_used", "pages_reserved", "created_at"]
    inlines = [MembershipInline]
    actions = ["reembed_selected"]

    @admin.action(
        description="Re-embed chunks not on the current embedding model (bulk lanes)",
        permissions=["change"],
    )
    def reembed_selected(self, request, queryset):
        actor = Actor.of_operator(request.user)
        for organisation in queryset:
            done = documents_reembed(
                actor=actor, organisation=organisation, limit=REEMBED_PER_REQUEST
            )
            left = f"; {done.left} more at the next ask" if done.left else ""
            self.message_user(
                request,
                f"{organisation.slug}: {done.documents} document(s) to re-embed with "
                f"{done.model}: {done.started} sent back to embed on the bulk lanes, "
                f"{done.in_pipeline} already in the pipeline, {done.waiting} waiting for the "
                f"retry of a failed run{left}. The dashboard shows "
                "progress; each is a run with its attempts.",
            )

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return [(None, {"fields": ["slug", "name", "page_limit"]})]
        return [
            (None, {"fields": ["slug", "name", "created_at"]}),
            ("Page quota", {"fields": ["quota", "page_limit", "pages_used", "pages_reserved"]}),
        ]

    @admin.display(description="Quota")
    def quota(self, obj):
        return quota_bar(obj)

    def save_formset(self, request, form, formset, change):
        if formset.model is not Membership:
            return super().save_formset(request, form, formset, change)
        # A member taken out (a row deleted, or changed to name another user) leaves
        # through the service, which pauses their connections in the same transaction.
        organisation = form.instance
        memberships = formset.save(commit=False)
        for membership in formset.deleted_objects:
            member_remove(organisation=organisation, user=membership.user)
        for membership in memberships:
            before = Membership.objects.filter(pk=membership.pk).select_related("user").first()
            if before is not None and before.user_id != membership.user_id:
                member_remove(organisation=organisation, user=before.user)
                membership.pk, membership._state.adding = None, True
            membership.save()
        formset.save_m2m()

    @admin.display(description="Quota")
    def quota_compact(self, obj):
        return quota_bar(obj, compact=True)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        organisation = self.get_object(request, unquote(object_id))
        if organisation is not None and self.has_view_or_change_permission(request, organisation):
            ledger, tokens = (
                usage_entry_list(organisation=organisation),
                api_token_list(organisation=organisation),
            )
            extra_context = {
                **(extra_context or {}),
                "ledger": ledger[:LEDGER_ROWS],
                "ledger_count": ledger.count(),
                "ledger_url": _filtered_changelist(UsageEntry, organisation),
                "tokens": tokens[:TOKEN_ROWS],
                "token_count": tokens.count(),
                "tokens_url": _filtered_changelist(ApiToken, organisation),
                "token_add_url": reverse("admin:documents_apitoken_add")
                + f"?organisation={organisation.id}",
            }
        return super().change_view(request, object_id, form_url, extra_context)

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


class ApiTokenCreateForm(forms.Form):
    organisation = forms.ModelChoiceField(queryset=Organisation.objects.order_by("slug"))
    name = forms.CharField(max_length=100, help_text="What the token is for, e.g. the integration.")
    role = forms.ChoiceField(
        choices=Membership.Role.choices,
        initial=Membership.Role.MEMBER,
        help_text="Viewer: read and search. Member: also upload, retry and cancel. "
        "Admin: also delete documents and manage tokens.",
    )
    # One random value per form shown: posting the same form again (a reload) finds the
    # token it made instead of making another.
    once = forms.CharField(widget=forms.HiddenInput, max_length=64)


class TokenStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "Active"), ("revoked", "Revoked")]

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are made and revoked by the token services only. The secret is shown once,
    when the token is made; a token is never edited, moved, un-revoked or deleted, so
    revocation keeps its history. Both are written to the admin log."""

    list_display = [
        "prefix",
        "name",
        "organisation",
        "role",
        "state",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = [TokenStateFilter, OrganisationFilter]
    list_select_related = ["organisation"]
    search_fields = ["prefix", "name", "organisation__slug"]
    ordering = ["-created_at", "-id"]
    fields = [
        "organisation",
        "name",
        "prefix",
        "role",
        "state",
        "created_by",
        "bound_to_maker",
        "created_at",
        "last_used_at",
        "revoked_at",
        "revoked_by",
        "revoked_by_token",
    ]
    readonly_fields = fields
    actions = ["revoke_selected"]

    # The once-values of the forms this session used, and the tokens they made.
    CREATED_SESSION_KEY = "documents.apitoken.created"

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .select_related("organisation", "created_by", "revoked_by", "revoked_by_token")
        )

    @admin.display(description="State")
    def state(self, obj):
        return "active" if obj.is_active else "revoked"

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_revoke_permission(self, request, obj=None):
        return request.user.has_perm(f"{self.opts.app_label}.change_{self.opts.model_name}")

    def get_urls(self):
        revoke = path(
            "<path:object_id>/revoke/",
            self.admin_site.admin_view(self.revoke_view),
            name=f"{self.opts.app_label}_{self.opts.model_name}_revoke",
        )
        return [revoke, *super().get_urls()]

    def _change_url(self, token_id: int) -> str:
        return reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_change", args=[token_id]
        )

    def add_view(self, request, form_url="", extra_context=None):
        if not self.has_add_permission(request):
            raise PermissionDenied
        made = request.session.get(self.CREATED_SESSION_KEY, {})
        if request.method == "POST":
            form = ApiTokenCreateForm(request.POST)
            if form.is_valid() and (token_id := made.get(form.cleaned_data["once"])):
                self.message_user(
                    request,
                    "This form already made this token; its secret was shown once and "
                    "cannot be shown again. Create another token if it was lost.",
                    messages.WARNING,
                )
                return HttpResponseRedirect(self._change_url(token_id))
            if form.is_valid():
                try:
                    with transaction.atomic():
                        token, secret = api_token_create(
                            organisation=form.cleaned_data["organisation"],
                            name=form.cleaned_data["name"],
                            created_by=request.user,
                            role=form.cleaned_data["role"],
                        )
                        self.log_addition(request, token, "Created; the secret was shown once.")
                except ServiceError as exc:
                    # Too many active tokens: said on the form, which keeps what was typed.
                    form.add_error(None, exc.message)
                    return self._page(
                        request, "create.html", title="Create an API token", form=form
                    )
                # Keep only the last few: enough to catch a reload, never the secret.
                made = {**dict(list(made.items())[-9:]), form.cleaned_data["once"]: token.id}
                request.session[self.CREATED_SESSION_KEY] = made
                return self._page(
                    request,
                    "created.html",
                    title="API token created",
                    token=token,
                    secret=secret,
                    token_url=self._change_url(token.pk),
                )
        else:
            form = ApiTokenCreateForm(
                initial={
                    "organisation": request.GET.get("organisation"),
                    "once": secrets.token_urlsafe(16),
                }
            )
        return self._page(request, "create.html", title="Create an API token", form=form)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "has_revoke_permission": self.has_revoke_permission(request),
        }
        return super().change_view(request, object_id, form_url, extra_context)

    def revoke_view(self, request, object_id):
        if not self.has_revoke_permission(request):
            raise PermissionDenied
        token = self.get_object(request, unquote(object_id))
        if token is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if request.method == "POST":
            self._revoke(request, [token])
            return HttpResponseRedirect(self._change_url(token.pk))
        return self._confirm_revoke(request, [token], action=None)

    @admin.action(description="Revoke selected API tokens", permissions=["revoke"])
    def revoke_selected(self, request, queryset):
        if request.POST.get("post") == "yes":
            self._revoke(request, queryset)
            return None
        return self._confirm_revoke(request, queryset, action="revoke_selected")

    def _revoke(self, request, tokens) -> None:
        with transaction.atomic():
            revoked = api_tokens_revoke(tokens=tokens, revoked_by=request.user)
            if revoked:
                LogEntry.objects.log_actions(
                    user_id=request.user.pk,
                    queryset=revoked,
                    action_flag=CHANGE,
                    change_message="Revoked.",
                )
        if revoked:
            names = ", ".join(f"{token.prefix}…" for token in revoked)
            self.message_user(request, f"Revoked {len(revoked)} API token(s): {names}")
        else:
            self.message_user(request, "Nothing was revoked: already revoked.", messages.WARNING)

    def _confirm_revoke(self, request, tokens, *, action: str | None):
        tokens = list(tokens)
        return self._page(
            request,
            "revoke_confirmation.html",
            title="Revoke API tokens?",
            active=[token for token in tokens if token.is_active],
            revoked=[token for token in tokens if not token.is_active],
            action=action,
            action_checkbox_name=helpers.ACTION_CHECKBOX_NAME,
        )

    def _page(self, request, template: str, **context):
        request.current_app = self.admin_site.name
        return TemplateResponse(
            request,
            f"admin/documents/apitoken/{template}",
            {
                **self.admin_site.each_context(request),
                "opts": self.opts,
                "has_view_permission": self.has_view_permission(request),
                **context,
            },
        )


SHA256 = re.compile(r"[0-9a-fA-F]{64}")


@admin.register(Document)
class DocumentAdmin(FastListAdmin, RecordAdmin):
    list_display = [
        "filename",
        "organisation",
        "kind",
        "page_count",
        "pages_without_text",
        "text_engine",
        "searchable_version",
        "chunk_count",
        "created_at",
        "deleted_at",
    ]
    # Deleted documents stay listed: their runs, history and charges are still here.
    list_filter = [
        "kind",
        "text_engine",
        ("deleted_at", admin.EmptyFieldListFilter),
        OrganisationFilter,
    ]
    list_select_related = ["organisation"]
    # The search itself is get_search_results: ids and hashes by key, names by words.
    search_fields = ["filename"]
    search_help_text = "A document id or SHA-256 (whole), or part of its name."
    readonly_fields = [f.name for f in Document._meta.fields]

    @admin.display(description="no text")
    def pages_without_text(self, document: Document) -> str:
        """Pages without a text layer (scans), of those counted: "3 of 40"."""
        if not document.textless_pages:
            return "-" if document.page_count is None else "0"
        return f"{len(document.textless_pages)} of {document.page_count}"

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        try:
            return queryset.filter(id=uuid.UUID(term)), False
        except ValueError:
            pass
        if SHA256.fullmatch(term):
            return queryset.filter(sha256=term.lower()), False
        # Words of a name: the trigram index on filenames answers them.
        return super().get_search_results(request, queryset, search_term)


@admin.register(QuotaReservation)
class QuotaReservationAdmin(FastListAdmin, RecordAdmin):
    list_display = ["run", "organisation", "pages", "estimated", "status", "created_at"]
    list_filter = ["status", OrganisationFilter]
    list_select_related = ["run", "organisation"]
    readonly_fields = [f.name for f in QuotaReservation._meta.fields]


@admin.register(UsageEntry)
class UsageEntryAdmin(FastListAdmin, RecordAdmin):
    list_display = ["organisation", "document", "document_version", "pages", "created_at"]
    list_filter = [OrganisationFilter]
    list_select_related = ["organisation", "document"]
    ordering = ["-created_at", "-id"]
    readonly_fields = [f.name for f in UsageEntry._meta.fields]


@admin.register(Chunk)
class ChunkAdmin(FastListAdmin, RecordAdmin):
    list_display = ["document", "version", "index", "embedding_model"]
    list_select_related = ["document"]
    # A chunk's text and vector are most of its row, and the list shows neither.
    list_defer = ("text", "embedding")
    readonly_fields = [f.name for f in Chunk._meta.fields]
