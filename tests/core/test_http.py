"""A file offered for download under its own name (RFC 6266, RFC 5987)."""

import unicodedata
from urllib.parse import unquote

from core.http import attachment


def test_a_plain_name_is_given_as_it_is():
    assert attachment("Quarterly report.pdf") == 'attachment; filename="Quarterly report.pdf"'


def test_a_name_that_is_not_plain_ascii_is_given_exactly_beside_an_ascii_one():
    assert attachment('Übersicht 報告 "final".pdf') == (
        'attachment; filename="Ubersicht _final.pdf"; '
        "filename*=UTF-8''%C3%9Cbersicht%20%E5%A0%B1%E5%91%8A%20%22final%22.pdf"
    )
    assert attachment("100%.pdf") == "attachment; filename=\"100.pdf\"; filename*=UTF-8''100%25.pdf"


def test_a_name_with_no_ascii_letters_falls_back_to_a_neutral_one_with_its_extension():
    assert attachment("報告.docx") == (
        "attachment; filename=\"document.docx\"; filename*=UTF-8''%E5%A0%B1%E5%91%8A.docx"
    )
    assert attachment("") == 'attachment; filename="document"'


def test_line_breaks_folders_and_leading_dots_never_reach_the_header():
    assert attachment("a\r\nContent-Type: text/html\r\n.pdf") == (
        'attachment; filename="aContent-Type: text_html.pdf"'
    )
    assert attachment("../../etc/passwd") == 'attachment; filename="_._etc_passwd"'
    assert attachment(".hidden.pdf") == 'attachment; filename="hidden.pdf"'


def test_no_folder_or_dot_dot_is_offered_whatever_characters_stand_for_them():
    # Fullwidth dots and solidi, a two-dot leader, a small full stop: "../../evil.pdf"
    # once normalised (NFKC), which is what a client's file system may make of them.
    names = [
        "\uff0e\uff0e\uff0f\uff0e\uff0e\uff0fevil.pdf",
        "\u2025\uff3c\u2025\uff3cevil.pdf",
        "\ufe52\ufe52/evil.pdf",
        "report..final\u2024\u2024pdf",
        "\u3002.\uff0e.hidden.pdf",
    ]
    for name in names:
        header = attachment(name)
        offered = [header.split('filename="')[1].split('"')[0]]
        if "filename*=UTF-8''" in header:
            offered.append(unquote(header.split("filename*=UTF-8''")[1]))
        for shown in offered:
            normal = unicodedata.normalize("NFKC", shown)
            assert "/" not in normal and "\\" not in normal, (name, header)
            assert ".." not in normal and not normal.startswith("."), (name, header)
    assert attachment("\uff0e\uff0e\uff0f\uff0e\uff0e\uff0fevil.pdf") == (
        'attachment; filename="_._evil.pdf"'
    )
