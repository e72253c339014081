"""Free text made fit to store."""

from core.text import ascii_number, printable, storable


def test_a_nul_is_written_out_and_a_lone_surrogate_replaced():
    assert storable("Unsupported filter /Foo\x00Bar") == "Unsupported filter /Foo\\x00Bar"
    assert storable("bad \ud800 name").encode("utf-8") == b"bad ? name"


def test_storable_text_is_left_as_it_is():
    text = "Привет, мир: ﬁ\t\n"
    assert storable(text) is text


def test_a_number_is_read_from_ascii_digits_alone():
    assert ascii_number("0042") == 42
    assert ascii_number("9" * 18) == 10**18 - 1
    # str.isdigit() takes every one of these.
    for text in ["", "²", "1²", "٣", "１２", "9" * 19, "+1", " 1", "1_000", "-1"]:
        assert ascii_number(text) is None, text
    assert ascii_number("123", max_digits=2) is None


def test_printable_text_writes_out_what_would_not_show_or_store():
    assert printable("bell\x07 \x1b[31mred\u202eFDP.exe\x00\ud800") == (
        "bell\\x07 \\x1b[31mred\\u202eFDP.exe\\x00\\ud800"
    )
    text = "Übersicht 報告.pdf"
    assert printable(text) is text
