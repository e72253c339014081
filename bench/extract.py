"""Text extraction side by side: raw pypdf, raw PDFium and our extraction.

    .venv/bin/python bench/extract.py [DIR ...] [--rounds 3] [--pipeline [--copies 2]]

Over the PDFs of tests/fixtures/real_world (and of every DIR given), each file's
best of `--rounds` readings summed, it prints pages/s of:

- pypdf: PdfReader and extract_text() for every page, in this process;
- PDFium: PdfDocument and the text of every page (pypdfium2), in this process;
- ours: formats.extract as the extract stage calls it, in the isolated child
  (core.isolation, the stage's limits and child reuse), form values, page checks and
  cleaning included; without the stage's database writes;
- with --pipeline, the whole pipeline: the same files (--copies of each) uploaded to
  gunicorn and processed by `run_workers` against the bench database (bench/_common.py),
  in pages/s from its first stage attempt to its last run's end;

and the mean word F1 of each against a reference: poppler's pdftotext where it is
installed, else PDFium. Files pypdf or PDFium cannot read are left out of every
column (listed below the table); pages are those each engine counted.
"""

import argparse
import collections
import io
import logging
import shutil
import subprocess
import time
import unicodedata
from pathlib import Path

from _common import ROOT, SCRATCH
from _pdf_text import pdfium_page_texts
from _pipeline_runs import run_burst
from _workers import stage_order
from django.db.models import Sum
from pypdf import PdfReader

from core.isolation import run_isolated, warm_up
from documents.reading import extract_limits
from formats import extract
from pipeline.models import ImportRun, RunStatus
from pipeline.stage_list import STAGES
from pipeline.stages.extract import CHILD_DOCUMENTS, isolation_limits

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
    texts = pdfium_page_texts(data)
    return "\n".join(texts), len(texts)


def ours(data: bytes) -> tuple[str, int]:
    extracted = run_isolated(
        extract,
        "pdf",
        data,
        extract_limits(),
        limits=isolation_limits(timeout=EXTRACT_TIMEOUT),
        reuse=CHILD_DOCUMENTS,
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


def through_the_pipeline(files: list[bytes], args) -> dict:
    """The files, `args.copies` times each (each copy made distinct by a comment after
    its end), uploaded through gunicorn while no worker runs, then processed by
    `run_workers` with its defaults (bench/_pipeline_runs.py): run_burst's figures, and
    `pages`, those of the runs that succeeded."""
    uploads = [data + b"\n%% copy %d\n" % copy for copy in range(args.copies) for data in files]
    args.upload_while_processing = False
    result = run_burst("simple", uploads, args, SCRATCH, label="-real-world", watch=False)
    runs = ImportRun.objects.filter(status=RunStatus.SUCCEEDED)
    result["pages"] = runs.aggregate(pages=Sum("document__page_count"))["pages"] or 0
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--pipeline",
        action="store_true",
        help="also process the files through the whole stack (gunicorn, run_workers)",
    )
    parser.add_argument("--copies", type=int, default=2, help="of each file, with --pipeline")
    parser.add_argument("--clients", type=int, default=8, help="upload clients, with --pipeline")
    parser.add_argument("--web-workers", type=int, default=3, help="gunicorn, with --pipeline")
    parser.add_argument("--timeout", type=float, default=900, help="seconds, with --pipeline")
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
    if args.pipeline:
        print_pipeline([data for _path, data, _expected in files], args, base)
    if skipped:
        print(f"\nleft out ({len(skipped)}): " + "; ".join(skipped))


def print_pipeline(files: list[bytes], args, pypdf_rate: float) -> None:
    result = through_the_pipeline(files, args)
    pages, seconds = result["pages"], result["elapsed"]
    rate = pages / seconds
    print(
        f"\nThe whole pipeline (store to index, `run_workers` defaults), {args.copies} copies "
        f"of each file, uploaded first; pages/s from the first stage attempt to the last "
        f"run's end\n"
    )
    print("| runs succeeded | pages | seconds | pages/s | documents/s | x pypdf in one process |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(
        f"| {result['succeeded']} of {result['runs']} | {pages} | {seconds:.1f} | {rate:.0f} "
        f"| {result['succeeded'] / seconds:.1f} | {rate / pypdf_rate:.1f} |"
    )
    order = stage_order()
    print(
        "\nper stage attempt, median ms of CPU: "
        + ", ".join(
            f"{stage} {result['body_cpu'][stage]:.0f}"
            for stage in order
            if result["body_cpu"][stage] == result["body_cpu"][stage]  # not NaN: measured
        )
        + f"; CPU s in all: workers {result['cpu_workers']:.1f}, extraction children "
        f"{result['cpu_isolated']:.1f}, PostgreSQL {result['cpu_pg']:.1f}, "
        f"gunicorn {result['cpu_web']:.1f}"
    )


if __name__ == "__main__":
    main()
