"""The member pages' colours that are not text, against what is around them: the focus
ring and the quota bar's parts need 3:1 (WCAG 1.4.11); axe-core checks text, not these."""

import re

from tests.support.processes import ROOT

CSS = ROOT / "static" / "css" / "paperlane.css"
WHITE = "#ffffff"


def _colours() -> dict[str, str]:
    root = re.search(r":root \{([^}]*)\}", CSS.read_text())[1]
    return dict(re.findall(r"--([a-z-]+): (#[0-9a-f]{6})", root))


def _luminance(colour: str) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(one: str, other: str) -> float:
    light, dark = sorted((_luminance(one), _luminance(other)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_contrast_is_computed_as_wcag_defines_it():
    assert round(contrast("#000000", WHITE), 1) == 21.0
    assert round(contrast("#767676", WHITE), 2) == 4.54


def test_the_focus_ring_and_the_quota_bars_held_pages_stand_out_3_to_1():
    colours = _colours()

    # The ring sits on the page's background or a card's white (a white ring inside it).
    for background in (WHITE, colours["bg"]):
        assert contrast(colours["focus"], background) >= 3, background
    # The held part of the bar meets the white of the pages left, and the page around it.
    for background in (WHITE, colours["bg"]):
        assert contrast(colours["held"], background) >= 3, background
    assert contrast(colours["accent"], WHITE) >= 3
