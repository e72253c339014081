"""OCR side by side: our path (formats/render.py then formats/ocr.py) against OCRmyPDF.

    .venv/bin/python bench/ocr.py [--dpi 300] [--rounds 2] [--rapidocr]

On the seeded scans of known text of tests/support/scans.py (five pages: serif and sans
text at 200 and 300 dpi, turned 1 to 2 degrees, JPEG noise, mixed fonts, two columns, a
table), in English, it prints pages/s per core and word F1 of:

- ours: each page of the image-only PDF drawn by PDFium at --dpi and read by ocr_page,
  in this process, the engine loaded once (as in the ocr stage's reused child);
- OCRmyPDF (its defaults, one job) on the same PDF, and OCRmyPDF with --deskew, their
  text read back with PDFium: the tool people reach for; it runs Debian's `tesseract`
  and Ghostscript, so it needs `apt-get install tesseract-ocr ghostscript`;
- with --rapidocr, RapidOCR (rapidocr_onnxruntime, one thread) on the pages we draw:
  the engine we did not choose (pip install rapidocr_onnxruntime to run it).

CPU seconds are this process's and its children's (Tesseract's OpenMP held to one thread
with OMP_THREAD_LIMIT=1), so pages/s per core is pages over CPU seconds; each engine's
best round counts. Then it reads the real scans tests/fixtures/real_world/congress-gray.pdf
and indirect-rotation.pdf (no ground truth: it prints the words found, and which of the
words a person reads on them were found).
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["OMP_THREAD_LIMIT"] = "1"  # before Tesseract loads: one thread per process

import pypdfium2 as pdfium

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _pdf_text import pdfium_page_texts  # noqa: E402

from formats.ocr import OCR_DPI, ocr_page, ocr_problem  # noqa: E402
from formats.render import RenderLimits, render_pdf_page  # noqa: E402
from tests.support.scans import NAMES, as_pdf, make_scan, word_f1  # noqa: E402

LANGUAGES = ("eng",)
LIMITS = RenderLimits(max_pixels=40_000_000)
FIXTURES = ROOT / "tests" / "fixtures" / "real_world"
# Words a person reads on the real scans (looked at by eye), to see whether OCR found them.
READ_BY_EYE = {
    "congress-gray.pdf": (
        "MESSAGE PRESIDENT UNITED STATES consular regulations Japan Washington GRANT "
        "HAMILTON FISH Secretary Commerce"
    ).split(),
    "indirect-rotation.pdf": (
        "International Containership Operators Singapore Scottsdale Beijing Shanghai "
        "Marseille COSCO Metropolis Republic France"
    ).split(),
}


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime




def ours(data: bytes, dpi: float) -> list[str]:
    pages = len(pdfium.PdfDocument(data))
    return [
        ocr_page(
            render_pdf_page(data, index, dpi=dpi, limits=LIMITS, grey=True), languages=LANGUAGES
        ).text
        for index in range(pages)
    ]


def ocrmypdf(data: bytes, *extra: str) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="paperlane-bench-ocr-") as scratch:
        source, target = Path(scratch) / "in.pdf", Path(scratch) / "out.pdf"
        source.write_bytes(data)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "ocrmypdf",
                "-q",
                "-l",
                "+".join(LANGUAGES),
                "--jobs",
                "1",
                "--optimize",
                "0",
                "--output-type",
                "pdf",
                *extra,
                str(source),
                str(target),
            ],
            check=True,
            timeout=900,
        )
        return pdfium_page_texts(target.read_bytes())


def rapidocr_engine():
    import numpy as np
    from rapidocr_onnxruntime import RapidOCR

    engine = RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1)

    def read(data: bytes, dpi: float) -> list[str]:
        texts = []
        for index in range(len(pdfium.PdfDocument(data))):
            picture = render_pdf_page(data, index, dpi=dpi, limits=LIMITS)
            lines, _ = engine(np.asarray(picture))
            texts.append("\n".join(line[1] for line in lines or []))
        return texts

    return read


def ocrmypdf_problem() -> str | None:
    done = subprocess.run([sys.executable, "-m", "ocrmypdf", "--version"], capture_output=True)
    if done.returncode:
        return "OCRmyPDF is not installed (pip install ocrmypdf)"
    for tool in ("tesseract", "gs"):
        if subprocess.run(["sh", "-c", f"command -v {tool}"], capture_output=True).returncode:
            return f"OCRmyPDF needs {tool} (apt-get install tesseract-ocr ghostscript)"
    return None


def measure(engines: dict, data: bytes, expected: list[str], args) -> list[tuple]:
    rows = []
    for name, read in engines.items():
        best, texts = float("inf"), []
        for _ in range(args.rounds):
            started = cpu_seconds()
            texts = read(data)
            best = min(best, cpu_seconds() - started)
        scores = [word_f1(want, got) for want, got in zip(expected, texts, strict=True)]
        rows.append((name, len(texts), best, scores))
    return rows


def real_scans(dpi: float) -> None:
    print("\nReal scans, ours at", dpi, "dpi (no ground truth)\n")
    print(
        "| file | pages | words found | mean confidence | seconds | words a person reads, found |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    openings = []
    for name, eye in READ_BY_EYE.items():
        data = (FIXTURES / name).read_bytes()
        started = time.perf_counter()
        pages = [
            ocr_page(
                render_pdf_page(data, index, dpi=dpi, limits=LIMITS, grey=True), languages=LANGUAGES
            )
            for index in range(len(pdfium.PdfDocument(data)))
        ]
        seconds = time.perf_counter() - started
        words = sum(page.words for page in pages)
        confidence = sum(page.confidence * page.words for page in pages) / max(words, 1)
        found = {word.strip(".,:;()").lower() for page in pages for word in page.text.split()}
        hits = [word for word in eye if word.lower() in found]
        missed = [word for word in eye if word.lower() not in found]
        print(
            f"| {name} | {len(pages)} | {words} | {confidence:.2f} | {seconds:.1f} "
            f"| {len(hits)} of {len(eye)}"
            + (f" (not: {', '.join(missed)})" if missed else "")
            + " |"
        )
        openings.append(f"{name}, page 1: {' '.join(pages[0].text.split()[:30])}")
    print("\nFirst words read:\n\n" + "\n".join(f"- {line}" for line in openings))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dpi", type=float, default=OCR_DPI, help="ours draws pages at this")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rapidocr", action="store_true", help="also RapidOCR (if installed)")
    args = parser.parse_args()
    problem = ocr_problem(LANGUAGES)
    if problem:
        sys.exit(problem)
    scans = [make_scan(name) for name in NAMES]
    data = as_pdf(scans)
    expected = [scan.text for scan in scans]
    ours(as_pdf(scans[:1]), args.dpi)  # load the engine once, as the stage's child does
    engines = {f"ours ({args.dpi:.0f} dpi)": lambda data: ours(data, args.dpi)}
    skipped = []
    if (why := ocrmypdf_problem()) is None:
        engines["OCRmyPDF"] = ocrmypdf
        engines["OCRmyPDF --deskew"] = lambda data: ocrmypdf(data, "--deskew")
    else:
        skipped.append(why)
    if args.rapidocr:
        try:
            read = rapidocr_engine()
        except ImportError:
            skipped.append("RapidOCR is not installed (pip install rapidocr_onnxruntime)")
        else:
            read(as_pdf(scans[:1]), args.dpi)  # its models load once too
            engines["RapidOCR"] = lambda data: read(data, args.dpi)
    rows = measure(engines, data, expected, args)
    print(
        f"{len(scans)} scans ({', '.join(NAMES)}), English, best CPU time of {args.rounds} rounds\n"
    )
    print("| engine | pages | CPU s | pages/s per core | mean word F1 | lowest page F1 |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, pages, seconds, scores in rows:
        worst = NAMES[scores.index(min(scores))]
        print(
            f"| {name} | {pages} | {seconds:.2f} | {pages / seconds:.2f} "
            f"| {sum(scores) / len(scores):.3f} | {min(scores):.3f} ({worst}) |"
        )
    for why in skipped:
        print(f"\nleft out: {why}")
    real_scans(args.dpi)


if __name__ == "__main__":
    main()
