"""The text layer of each page of a PDF as PDFium reads it, for the benchmarks that
compare a reader with it (bench/extract.py) or read what OCRmyPDF wrote (bench/ocr.py)."""

import pypdfium2 as pdfium


def pdfium_page_texts(data: bytes) -> list[str]:
    document = pdfium.PdfDocument(data)
    texts = []
    for index in range(len(document)):
        page = document[index]
        textpage = page.get_textpage()
        texts.append(textpage.get_text_bounded())
        textpage.close()
        page.close()
    document.close()
    return texts
