"""What a Word file's text reads as, as a person reads the page (formats/docx_text.py),
in files made as Word Online, LibreOffice and python-docx make them
(tests/support/docx_makers.py): the characters Word keeps as elements of a run
(non-breaking hyphens, symbols, tabs), text boxes, fields and tracked changes."""

import pytest

from formats import docx
from formats.docx_package import safe_parser
from formats.docx_symbols import symbol as symbol_character
from formats.docx_text import MAX_FIELD_DEPTH, PartText
from tests.support.docx_makers import (
    PRODUCERS,
    deleted,
    field,
    inserted,
    non_breaking_hyphen,
    paragraph,
    part_xml,
    run,
    simple_field,
    soft_hyphen,
    symbol,
    tab,
    text_box,
)

producers = pytest.mark.parametrize("make", PRODUCERS.values(), ids=PRODUCERS.keys())


def blocks(data: bytes, limits) -> list[str]:
    return docx.extract(data, limits=limits).text.split("\n\n")


@producers
def test_a_non_breaking_hyphen_is_a_hyphen_and_a_soft_hyphen_nothing(make, limits):
    data = make(
        paragraph(
            run("Vaccines against COVID"),
            non_breaking_hyphen(),
            run("19 are ef"),
            soft_hyphen(),
            run("fective."),
        )
    )

    # The search index reads "-" as a space between words: "covid" finds it.
    assert blocks(data, limits) == ["Vaccines against COVID-19 are effective."]


@producers
def test_symbols_of_symbol_fonts_are_their_characters(make, limits):
    data = make(
        paragraph(
            symbol("Wingdings", "F0FC"),
            run(" done "),
            symbol("Wingdings", "F0FE"),
            run(" checked "),
            symbol("Wingdings", "F0A8"),
            run(" open "),
            symbol("Wingdings", "F0D8"),
            run(" next "),
            symbol("Symbol", "F0B7"),
            run(" item "),
            symbol("Symbol", "F061"),
            symbol("Symbol", "F062"),
            symbol("Symbol", "F057"),
        ),
        # A font without a known mapping, and a code a font does not have: nothing.
        paragraph(run("x"), symbol("Marlett", "F061"), symbol("Wingdings", "F020"), run("y")),
    )

    assert blocks(data, limits) == ["✔ done ☑ checked ◻ open ➢ next • item αβΩ", "xy"]


@pytest.mark.parametrize(
    ("font", "char", "character"),
    [
        ("Wingdings", "F0FC", "\u2714"),  # ✔
        ("Wingdings", "F0FB", "\u2718"),  # ✘
        ("Wingdings", "F0FD", "\u2612"),  # ☒
        ("Wingdings", "F0FE", "\u2611"),  # ☑
        ("Wingdings", "F06F", "\u25a1"),  # □
        ("Wingdings", "F0A7", "\u25aa"),  # ▪
        ("Wingdings", "F06C", "\u25cf"),  # ●
        ("Wingdings", "F0E8", "\u2794"),  # ➔
        ("Wingdings", "F0E0", "\u2192"),  # →
        ("Wingdings", "F04A", "\u263a"),  # ☺
        ("Wingdings", "F081", "\u2460"),  # ①
        ("wingdings", "00FC", "\u2714"),  # the font's byte without F0, any case
        ("Symbol", "F0B7", "\u2022"),  # •
        ("Symbol", "F061", "\u03b1"),  # α
        ("Symbol", "F070", "\u03c0"),  # π
        ("Symbol", "F053", "\u03a3"),  # Σ
        ("Symbol", "F044", "\u0394"),  # Δ
        ("Symbol", "F0AE", "\u2192"),  # →
        ("Symbol", "F0A3", "\u2264"),  # ≤
        ("Symbol", "F0D6", "\u221a"),  # √
        ("Symbol", "F0E6", ""),  # a piece of a large bracket
        ("Symbol", "F161", ""),  # outside the font's range
        ("Symbol", "zz", ""),
        ("Wingdings 9", "F0FC", ""),
        ("", "F0FC", ""),
    ],
)
def test_a_symbol_reads_as_the_character_its_font_draws(font, char, character):
    assert symbol_character(font, char) == character


@producers
def test_tabs_are_read_from_runs_and_tab_stops_are_not_tabs(make, limits):
    data = make(paragraph(run("Name"), tab(), run("Amount"), tab_stops=True))

    assert blocks(data, limits) == ["Name\tAmount"]


@producers
def test_a_text_box_is_read_once_after_the_paragraph_that_anchors_it(make, limits):
    data = make(
        paragraph(run("Before "), text_box(paragraph(run("Boxed"), tab_stops=True)), run("after")),
        paragraph(run("Next paragraph.")),
    )

    assert blocks(data, limits) == ["Before after", "Boxed", "Next paragraph."]


@producers
def test_text_boxes_in_text_boxes_and_tables_keep_their_order(make, limits):
    inner = text_box(paragraph(run("Inner box")))
    table = (
        "<w:tbl><w:tr><w:tc><w:p>"
        f"{run('Cell')}{text_box(paragraph(run('Box in a cell')))}</w:p></w:tc>"
        f"<w:tc>{paragraph(run('Second cell'))}</w:tc></w:tr></w:tbl>"
    )
    data = make(
        paragraph(run("Anchor"), text_box(paragraph(run("Outer box"), inner))),
        table,
    )

    assert blocks(data, limits) == [
        "Anchor",
        "Outer box",
        "Inner box",
        "Cell\nBox in a cell\tSecond cell",
    ]


@producers
def test_a_field_reads_as_its_result_not_its_instruction(make, limits):
    nested = (
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        '<w:r><w:instrText xml:space="preserve"> IF </w:instrText></w:r>'
        # A field in the instruction: its result is part of the instruction, not the page.
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        '<w:r><w:instrText xml:space="preserve"> MERGEFIELD Status </w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r>'
        f"{run('Pre')}{non_breaking_hyphen()}{run('paid')}"
        '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
        '<w:r><w:instrText xml:space="preserve"> = "Pre-paid" "Settled" "Open" </w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r>'
        f"{run('Settled')}"
        '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
    )
    index_entry = (
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        '<w:r><w:instrText xml:space="preserve"> XE "Hidden term" </w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
    )
    data = make(
        paragraph(
            run("Page "),
            field("PAGE \\* MERGEFORMAT", "3"),
            run(" of "),
            simple_field("NUMPAGES", "9"),
        ),
        paragraph(run("Invoice "), nested, run("."), index_entry),
        paragraph(run("Updated "), field('DATE \\@ "d MMMM yyyy"', "4 March 2024")),
    )

    assert blocks(data, limits) == ["Page 3 of 9", "Invoice Settled.", "Updated 4 March 2024"]


@producers
def test_a_field_whose_result_spans_paragraphs_is_read_whole(make, limits):
    begin = '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
    instruction = '<w:r><w:instrText xml:space="preserve"> TOC \\o "1-3" \\h </w:instrText></w:r>'
    separate = '<w:r><w:fldChar w:fldCharType="separate"/></w:r>'
    end = '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
    data = make(
        paragraph(begin, instruction, separate, run("Introduction"), tab(), run("1")),
        paragraph(run("Methods"), tab(), run("2"), end),
        paragraph(run("Introduction body.")),
    )

    assert blocks(data, limits) == ["Introduction\t1", "Methods\t2", "Introduction body."]


@producers
def test_tracked_changes_read_as_accepted_insertions_in_deletions_out(make, limits):
    moved = '<w:moveFrom w:id="7" w:author="Reviewer"><w:r><w:t>moved </w:t></w:r></w:moveFrom>'
    data = make(
        paragraph(run("The fee is "), deleted("ten"), inserted("twelve"), run(" euros.")),
        paragraph(run("Text "), moved, run("stays."), deleted(" Gone"), deleted("\u2011")),
        paragraph(
            '<w:moveTo w:id="8" w:author="Reviewer"><w:r><w:t>Moved here.</w:t></w:r></w:moveTo>'
        ),
    )

    assert blocks(data, limits) == ["The fee is twelve euros.", "Text stays.", "Moved here."]


@producers
def test_the_characters_of_deleted_runs_are_not_read(make, limits):
    deleted_characters = (
        '<w:del w:id="9" w:author="Reviewer"><w:r><w:tab/><w:noBreakHyphen/>'
        '<w:sym w:font="Wingdings" w:char="F0FC"/><w:br/></w:r></w:del>'
    )
    data = make(paragraph(run("One"), deleted_characters, run("piece")))

    assert blocks(data, limits) == ["Onepiece"]


@producers
def test_headers_and_footers_read_the_same_way(make, limits):
    data = make(
        paragraph(run("Body.")),
        header=paragraph(run("COVID"), non_breaking_hyphen(), run("19 briefing"), tab_stops=True),
        footer=paragraph(run("Page "), field("PAGE", "1"), tab(), symbol("Wingdings", "F0FC")),
    )

    assert blocks(data, limits) == ["Body.", "COVID-19 briefing", "Page 1\t✔"]


def test_fields_nested_past_any_documents_depth_are_counted_not_held():
    begin, end = (f'<w:r><w:fldChar w:fldCharType="{kind}"/></w:r>' for kind in ("begin", "end"))
    head, tail = part_xml("body", paragraph(run("Before "), "|", run("after"))).split("|")
    read: list[str] = []
    reader = PartText(lambda block, _: read.append(block), budget=1000)
    parser = safe_parser()
    parser.StartElementHandler, parser.EndElementHandler = reader.start, reader.end
    parser.CharacterDataHandler = reader.text

    parser.Parse(head + begin * 10_000, False)
    held = len(reader._fields)
    parser.Parse(end * 10_000 + tail, True)

    assert held == MAX_FIELD_DEPTH
    assert read == ["Before after"]
