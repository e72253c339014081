from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import permission_required
from django.urls import include, path

from config.api import api
from config.errors import api_not_found
from core.signin import LimitedPasswordChangeView
from operations.admin.password_change import admin_password_change_view
from operations.dashboard import pipeline_dashboard_view
from operations.metrics import metrics_view
from operations.models import VIEW_PIPELINE

urlpatterns = [
    # Before admin.site.urls, whose catch-all would otherwise answer it. It is also the
    # address of the pipeline app's index in the admin: its heading and breadcrumbs lead
    # here, and the dashboard links the app's lists (runs, attempts, dead letter).
    path(
        "admin/pipeline/",
        admin.site.admin_view(
            permission_required(VIEW_PIPELINE, raise_exception=True)(pipeline_dashboard_view)
        ),
        name="pipeline_dashboard",
    ),
    # Django's own, with wrong old passwords limited as on /accounts/password/.
    path(
        "admin/password_change/",
        admin.site.admin_view(admin_password_change_view, cacheable=True),
        name="admin_password_change",
    ),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    # What the API does not have is its JSON 404, whatever DEBUG says.
    path("api/", api_not_found, name="api_not_found"),
    path("api/<path:rest>", api_not_found, name="api_not_found"),
    # Staff with operations.view_pipeline, or Authorization: Bearer <PAPERLANE_METRICS_TOKEN>.
    path("metrics", metrics_view, name="pipeline_metrics"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path(
        "accounts/password/",
        LimitedPasswordChangeView.as_view(template_name="registration/password_change.html"),
        name="password_change",
    ),
    path(
        "accounts/password/done/",
        auth_views.PasswordChangeDoneView.as_view(
            template_name="registration/password_change_done.html"
        ),
        name="password_change_done",
    ),
    path("connections/", include("web.connection_urls")),
    path("", include("web.urls")),
]

handler400 = "config.errors.bad_request"
handler404 = "config.errors.page_not_found"
handler500 = "config.errors.server_error"
