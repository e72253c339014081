"""Text extraction side by side: raw pypdf, raw PDFium and our extraction.

    .venv/bin/python bench/extract.py [DIR ...] [--rounds 3]

Over the PDFs of tests/fixtures/real_world (and of every DIR given), each file's
best of `--rounds` readings summed, it prints pages/s of:

- pypdf: PdfReader and extract_text() for every page, in this process;
- PDFium: PdfDocument and the text of every page (pypdfium2), in this process;
- ours: documents.formats.extract as the extract stage calls it, in the isolated child
  (core.isolation, the stage's limits and child reuse), form values, page checks and
  cleaning included; without the stage's database writes;

and the mean word F1 of each against a reference: poppler's pdftotext where it is
installed, else PDFium. Files pypdf or PDFium cannot read are left out of every
column (listed below the table); pages are those each engine counted.
"""

import argparse
import collections
import io
import logging
import os
import shutil
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django  # noqa: E402

django.setup()

import pypdfium2 as pdfium  # noqa: E402
from django.conf import settings  # noqa: E402
from pypdf import PdfReader  # noqa: E402

from core.isolation import run_isolated, warm_up  # noqa: E402
from documents.formats import extract, extract_limits  # noqa: E402
from pipeline.stage_list import STAGES  # noqa: E402
from pipeline.stages.extract import isolation_limits  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "real_world"
EXTRACT_TIMEOUT = next(spec.timeout for spec in STAGES if spec.name == "extract")


def words(text: str) -> collections.Counter:
    return collections.Counter(unicodedata.normalize("NFKC", text).split())


def f1(found: collections.Counter, reference: collections.Counter) -> float:
    if not found and not reference:
        return 1.0
    overlap = sum((found & reference).values())
    return 2 * overlap / (sum(found.values()) + sum(reference.values()))


def with_pypdf(data: bytes) -> tuple[str, int]:
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        reader.decrypt("")
    return "\n".join(page.extract_text() or "" for page in reader.pages), len(reader.pages)


def with_pdfium(data: bytes) -> tuple[str, int]:
    document = pdfium.PdfDocument(data)
    texts = []
    for index in range(len(document)):
        page = document[index]
        textpage = page.get_textpage()
        texts.append(textpage.get_text_bounded())
        textpage.close()
        page.close()
    count = len(document)
    document.close()
    return "\n".join(texts), count


def ours(data: bytes) -> tuple[str, int]:
    extracted = run_isolated(
        extract,
        "pdf",
        data,
        extract_limits(),
        limits=isolation_limits(timeout=EXTRACT_TIMEOUT),
        reuse=settings.PAPERLANE_EXTRACT_CHILD_DOCUMENTS,
    )
    return extracted.text, extracted.page_count


def reference(path: Path, data: bytes) -> str:
    if shutil.which("pdftotext"):
        done = subprocess.run(
            ["pdftotext", "-q", "-enc", "UTF-8", str(path), "-"], capture_output=True, timeout=60
        )
        return done.stdout.decode("utf-8", errors="replace")
    return with_pdfium(data)[0]


ENGINES = {"pypdf": with_pypdf, "PDFium": with_pdfium, "ours": ours}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # pypdf's warnings about damaged files
    paths = sorted(FIXTURES.glob("*.pdf"))
    for folder in args.dirs:
        paths += sorted(folder.rglob("*.pdf"))
    warm_up()
    files, skipped = [], []
    for path in paths:
        data = path.read_bytes()
        try:
            for engine in ENGINES.values():
                engine(data)
        except Exception as exc:
            skipped.append(f"{path.name}: {type(exc).__name__}")
            continue
        files.append((path, data, words(reference(path, data))))
    # Each file's best time over the rounds, summed: a pause of the machine in one round
    # costs that file one reading, not the engine its whole round.
    best = {name: [float("inf")] * len(files) for name in ENGINES}
    pages, scores = dict.fromkeys(ENGINES, 0), {name: [] for name in ENGINES}
    for round_number in range(args.rounds):
        for name, engine in ENGINES.items():
            counted = 0
            for index, (_path, data, expected) in enumerate(files):
                started = time.perf_counter()
                text, count = engine(data)
                best[name][index] = min(best[name][index], time.perf_counter() - started)
                counted += count
                if round_number == 0:
                    scores[name].append(f1(words(text), expected))
            pages[name] = counted
    seconds = {name: sum(times) for name, times in best.items()}
    against = "pdftotext" if shutil.which("pdftotext") else "PDFium"
    print(f"{len(files)} PDFs, each the best of {args.rounds}; word F1 against {against}\n")
    print("| engine | pages | seconds | pages/s | x pypdf | mean F1 | files under 0.9 |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    base = pages["pypdf"] / seconds["pypdf"]
    for name in ENGINES:
        rate = pages[name] / seconds[name]
        under = sum(score < 0.9 for score in scores[name])
        mean = sum(scores[name]) / len(scores[name])
        print(
            f"| {name} | {pages[name]} | {seconds[name]:.2f} | {rate:.0f} | {rate / base:.1f} "
            f"| {mean:.3f} | {under} |"
        )
    if skipped:
        print(f"\nleft out ({len(skipped)}): " + "; ".join(skipped))


if __name__ == "__main__":
    main()
