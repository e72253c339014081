from django.urls import path

from documents import views

app_name = "documents"

urlpatterns = [
    path("", views.document_list_view, name="list"),
    path("organisation/", views.organisation_switch_view, name="switch_organisation"),
    path("runs/<uuid:run_id>/retry/", views.run_action_view, {"action": "retry"}, name="run_retry"),
    path(
        "runs/<uuid:run_id>/cancel/", views.run_action_view, {"action": "cancel"}, name="run_cancel"
    ),
]
