"""Page pictures: what drawing a page costs, and how big it is, per size and format.

    .venv/bin/python bench/pictures.py [DIR ...] [--pages 3] [--rounds 3]

Over the PDFs of tests/fixtures/real_world (and of every DIR given), the first
`--pages` pages of each, it prints per picture size (documents.pictures.PICTURE_SIZES:
a page at 96 dpi, the list's 200 px preview) and format (PNG, WebP and JPEG at
formats.render.PICTURE_QUALITY):

- draw ms: PDFium drawing the page (formats.render.render_pdf_page), in this process,
  the best of `--rounds`;
- encode ms: Pillow encoding the drawn page, the best of `--rounds`;
- KB: the mean and largest encoded picture;

then, for the format chosen, what a person waits for a picture not yet kept: the page
drawn and encoded in the isolated child as documents.pictures asks (its limits, child
reuse, the file handed over), per picture, median and 95th percentile; and what a
stage drawing every page of every document at upload would spend (the sum of draw and
encode over all the pages of these files).
"""

import argparse
import io
import statistics
import time
from pathlib import Path

import pypdfium2 as pdfium
from _common import ROOT

from core.isolation import run_isolated, warm_up
from documents.pictures import (
    PICTURE_CHILD_PAGES,
    PICTURE_FORMAT,
    PICTURE_MAX_PIXELS,
    PICTURE_SIZES,
    picture_limits,
)
from formats.render import (
    PICTURE_FORMATS,
    RenderLimits,
    page_picture,
    picture_encode,
    render_pdf_page,
)

FIXTURES = ROOT / "tests" / "fixtures" / "real_world"


def readable(paths: list[Path]) -> list[tuple[Path, bytes, int]]:
    files = []
    for path in paths:
        data = path.read_bytes()
        try:
            document = pdfium.PdfDocument(data)
        except pdfium.PdfiumError:
            continue
        files.append((path, data, len(document)))
        document.close()
    return files


def best(rounds: int, fn, *args, **kwargs) -> tuple[float, object]:
    times, result = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        result = fn(*args, **kwargs)
        times.append(time.perf_counter() - started)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="*", type=Path)
    parser.add_argument("--pages", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    paths = sorted(FIXTURES.glob("*.pdf"))
    for folder in args.dirs:
        paths += sorted(folder.glob("**/*.pdf"))
    files = readable(paths)
    pages = [(data, index) for _p, data, count in files for index in range(min(count, args.pages))]
    limits = RenderLimits(max_pixels=PICTURE_MAX_PIXELS)
    print(f"{len(files)} PDFs, {len(pages)} pages (the first {args.pages} of each)\n")
    print("| size | format | draw ms/page | encode ms/page | mean KB | largest KB |")
    print("| --- | --- | --- | --- | --- | --- |")
    per_page_ms = {}
    for name, size in PICTURE_SIZES.items():
        drawn, draw_seconds = [], 0.0
        for data, index in pages:
            seconds, picture = best(
                args.rounds,
                render_pdf_page,
                data,
                index,
                dpi=size.dpi,
                limits=limits,
                width=size.width,
            )
            draw_seconds += seconds
            drawn.append(picture)
        for image_format in PICTURE_FORMATS:
            encode_seconds, sizes = 0.0, []
            for picture in drawn:
                seconds, encoded = best(args.rounds, picture_encode, picture, image_format)
                encode_seconds += seconds
                sizes.append(len(encoded))
            draw_ms = draw_seconds * 1000 / len(pages)
            encode_ms = encode_seconds * 1000 / len(pages)
            per_page_ms[name, image_format] = draw_ms + encode_ms
            print(
                f"| {name} | {image_format} | {draw_ms:.1f} | {encode_ms:.1f} "
                f"| {statistics.mean(sizes) / 1024:.1f} | {max(sizes) / 1024:.1f} |"
            )
    warm_up()
    print(f"\nOn demand, {PICTURE_FORMAT} in the isolated child (documents.pictures):\n")
    print("| size | pictures | median ms | p95 ms |")
    print("| --- | --- | --- | --- |")
    for name, size in PICTURE_SIZES.items():
        waits = []
        for data, index in pages:
            started = time.perf_counter()
            run_isolated(
                page_picture,
                index,
                dpi=size.dpi,
                width=size.width,
                max_pixels=PICTURE_MAX_PIXELS,
                image_format=PICTURE_FORMAT,
                file=io.BytesIO(data),
                limits=picture_limits(),
                reuse=PICTURE_CHILD_PAGES,
            )
            waits.append((time.perf_counter() - started) * 1000)
        p95 = statistics.quantiles(waits, n=20)[-1] if len(waits) > 1 else waits[0]
        print(f"| {name} | {len(waits)} | {statistics.median(waits):.0f} | {p95:.0f} |")
    total_pages = sum(count for _p, _d, count in files)
    every = sum(per_page_ms[name, PICTURE_FORMAT] for name in PICTURE_SIZES) * total_pages
    print(
        f"\nDrawn at upload, every page of these {len(files)} files ({total_pages} pages) "
        f"at both sizes: {every / 1000:.1f} s of CPU, "
        f"{every / total_pages:.0f} ms a page."
    )


if __name__ == "__main__":
    main()
