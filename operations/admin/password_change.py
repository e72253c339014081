"""The admin's own password change (Django's AdminSite.password_change) with the
limit on wrong old passwords the members' page has (core/signin.py). config/urls.py
routes /admin/password_change/ here, before the admin's own URLs."""

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from core.signin import LimitedPasswordChangeForm, LimitedPasswordChangeView


class AdminPasswordChangeForm(LimitedPasswordChangeForm):
    # As django.contrib.admin.forms.AdminPasswordChangeForm marks its fields.
    required_css_class = "required"


def admin_password_change_view(request: HttpRequest) -> HttpResponse:
    request.current_app = admin.site.name
    return LimitedPasswordChangeView.as_view(
        form_class=AdminPasswordChangeForm,
        success_url=reverse("admin:password_change_done", current_app=admin.site.name),
        extra_context=admin.site.each_context(request),
    )(request)
