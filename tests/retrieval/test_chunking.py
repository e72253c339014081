from retrieval.chunking import clean_text, split_chunks


def test_cleaning_normalises_spacing_and_mends_broken_words():
    raw = "Docu-\nment\x00  with\t\tgaps\r\n\r\n\r\nand\u00a0more  "

    assert clean_text(raw) == "Document with gaps\n\nand more"


def test_chunks_cover_the_text_within_the_size_with_overlap():
    text = " ".join(f"Sentence number {n} is here." for n in range(400))

    chunks = split_chunks(text, size=500, overlap=100)

    assert all(len(c) <= 500 for c in chunks)
    assert chunks[0].startswith("Sentence number 0 ")
    assert chunks[-1].endswith("Sentence number 399 is here.")
    for earlier, later in zip(chunks, chunks[1:], strict=False):
        assert earlier.endswith(".")
        assert later[:20] in earlier  # the overlap repeats the end of the previous chunk
    assert split_chunks("") == []
