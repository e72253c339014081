from django.urls import path

from web import (
    document_actions,
    document_views,
    live_views,
    member_views,
    organisation_views,
    token_views,
    upload_views,
    views,
    webhook_views,
)

app_name = "web"

urlpatterns = [
    path("", document_views.document_list_view, name="document_list"),
    path(
        "organisation/",
        organisation_views.organisation_switch_view,
        name="switch_organisation",
    ),
    path("members/", member_views.members_view, name="members"),
    path("search/", views.search_view, name="search"),
    path("upload/", upload_views.upload_view, name="upload"),
    path("upload/direct/", upload_views.direct_upload_view, name="direct_upload"),
    path(
        "upload/direct/<uuid:upload_id>/complete/",
        upload_views.direct_upload_complete_view,
        name="direct_upload_complete",
    ),
    path("documents/live/", live_views.documents_live_view, name="documents_live"),
    path(
        "documents/<uuid:document_id>/",
        document_views.document_detail_view,
        name="document_detail",
    ),
    path(
        "documents/<uuid:document_id>/live/",
        live_views.document_live_view,
        name="document_live",
    ),
    path(
        "documents/<uuid:document_id>/file/",
        document_views.document_file_view,
        name="document_file",
    ),
    path(
        "documents/<uuid:document_id>/pages/<int:number>.webp",
        document_views.page_picture_view,
        name="page_picture",
    ),
    path(
        "documents/<uuid:document_id>/delete/",
        document_actions.document_delete_view,
        name="document_delete",
    ),
    path(
        "runs/<uuid:run_id>/retry/",
        document_actions.run_action_view,
        {"action": "retry"},
        name="run_retry",
    ),
    path(
        "runs/<uuid:run_id>/cancel/",
        document_actions.run_action_view,
        {"action": "cancel"},
        name="run_cancel",
    ),
    path("tokens/", token_views.token_list_view, name="token_list"),
    path("tokens/<int:token_id>/revoke/", token_views.token_revoke_view, name="token_revoke"),
    path("webhooks/", webhook_views.webhook_list_view, name="webhook_list"),
    path(
        "webhooks/<uuid:endpoint_id>/", webhook_views.webhook_detail_view, name="webhook_detail"
    ),
    path(
        "webhooks/<uuid:endpoint_id>/delete/",
        webhook_views.webhook_delete_view,
        name="webhook_delete",
    ),
    path(
        "webhooks/<uuid:endpoint_id>/deliveries/<uuid:delivery_id>/send-again/",
        webhook_views.webhook_send_again_view,
        name="webhook_send_again",
    ),
    path(
        "webhooks/<uuid:endpoint_id>/<slug:action>/",
        webhook_views.webhook_action_view,
        name="webhook_action",
    ),
]
