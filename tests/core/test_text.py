"""Free text made fit to store."""

from core.text import storable


def test_a_nul_is_written_out_and_a_lone_surrogate_replaced():
    assert storable("Unsupported filter /Foo\x00Bar") == "Unsupported filter /Foo\\x00Bar"
    assert storable("bad \ud800 name").encode("utf-8") == b"bad ? name"


def test_storable_text_is_left_as_it_is():
    text = "Привет, мир: ﬁ\t\n"
    assert storable(text) is text
