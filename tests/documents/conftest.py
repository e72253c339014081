"""What the admin tests share: an operator's client, the page text, the admin's formats."""

import html
import re

import pytest
from django.test import override_settings
from django.utils import formats


def page_text(response) -> str:
    """The words a person reads on the page: tags dropped, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


@pytest.fixture
def site_formats():
    """The admin as config/settings.py will set it up (FORMAT_MODULE_PATH), in a time zone
    far from UTC: a time shown without seconds, or in UTC, does not match."""
    with override_settings(FORMAT_MODULE_PATH=["config.formats"], TIME_ZONE="Asia/Kathmandu"):
        # Django caches formats per language and does not reset them for this setting.
        formats.reset_format_cache()
        yield
    formats.reset_format_cache()
