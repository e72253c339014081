from django.urls import path

from web import organisation_views, views

app_name = "web"

urlpatterns = [
    path("", views.document_list_view, name="document_list"),
    path(
        "organisation/",
        organisation_views.organisation_switch_view,
        name="switch_organisation",
    ),
    path("search/", views.search_view, name="search"),
    path("runs/<uuid:run_id>/retry/", views.run_action_view, {"action": "retry"}, name="run_retry"),
    path(
        "runs/<uuid:run_id>/cancel/", views.run_action_view, {"action": "cancel"}, name="run_cancel"
    ),
    path(
        "documents/<uuid:document_id>/delete/",
        views.document_delete_view,
        name="document_delete",
    ),
]
