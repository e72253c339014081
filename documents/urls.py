from django.urls import path

from documents import views

app_name = "documents"

urlpatterns = [
    path("organisation/", views.organisation_switch_view, name="switch_organisation"),
]
