"""Checks Django runs at start (`manage.py check`, and every command that starts the
web or the workers): OCR's languages. A language the OCR engine cannot read here is a
configuration error, named at start, rather than a document that fails later; no engine
at all turns OCR off, with a warning (scans then keep their pages without text, and say
so)."""

from django.conf import settings
from django.core import checks

from pipeline.stages.ocr import languages_of, ocr_engine_unavailable, ocr_unavailable


@checks.register()
def ocr_languages_check(app_configs, **kwargs) -> list[checks.CheckMessage]:
    if engine := ocr_engine_unavailable():
        return [checks.Warning(f"OCR is off: {engine}", id="paperlane.W001")]
    languages = languages_of(settings.PAPERLANE_OCR_LANGUAGES)
    if problem := ocr_unavailable(languages):
        return [
            checks.Error(
                f"PAPERLANE_OCR_LANGUAGES={settings.PAPERLANE_OCR_LANGUAGES}: {problem}",
                hint="Install the language pack, or set PAPERLANE_OCR_LANGUAGES to languages "
                "this server has (docs/production.md).",
                id="paperlane.E001",
            )
        ]
    return []
