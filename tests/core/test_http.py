"""A file offered for download under its own name (RFC 6266, RFC 5987)."""

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
    assert attachment("../../etc/passwd") == 'attachment; filename="_.._etc_passwd"'
    assert attachment(".hidden.pdf") == 'attachment; filename="hidden.pdf"'
