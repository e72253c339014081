"""The characters Word draws for `w:sym`: a code in a symbol font, not a Unicode character.

`w:char` is hexadecimal, usually in the private range F000-F0FF that Windows gives symbol
fonts (F0FC is byte FC of the font). Symbol follows Adobe's Symbol encoding; Wingdings has
no standard mapping, so only the characters people type with it (check marks, ballot
boxes, bullets, arrows, hands, faces, numbers in circles) are read, each as the Unicode
character that looks like it. Any other font or code reads as nothing.
"""

# Adobe's Symbol encoding, without the pieces of large brackets and integrals.
SYMBOL = {
    **{code: chr(code) for code in b"!#%&()+,./0123456789:;<=>?[]_{|}"},
    0x22: "\u2200",  # ∀
    0x24: "\u2203",  # ∃
    0x27: "\u220b",  # ∋
    0x2A: "\u2217",  # ∗
    0x2D: "\u2212",  # −
    0x40: "\u2245",  # ≅
    # Greek capitals (A to Z in the font's order: Chi at C, Phi at F, Theta at Q...).
    **dict(zip(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", "ΑΒΧΔΕΦΓΗΙϑΚΛΜΝΟΠΘΡΣΤΥςΩΞΨΖ", strict=True)),
    0x5C: "\u2234",  # ∴
    0x5E: "\u22a5",  # ⊥
    **dict(zip(b"abcdefghijklmnopqrstuvwxyz", "αβχδεφγηιϕκλμνοπθρστυϖωξψζ", strict=True)),
    0x7E: "\u223c",  # ∼
    0xA0: "\u20ac",  # €
    0xA1: "\u03d2",  # ϒ
    0xA2: "\u2032",  # ′
    0xA3: "\u2264",  # ≤
    0xA4: "\u2044",  # ⁄
    0xA5: "\u221e",  # ∞
    0xA6: "\u0192",  # ƒ
    0xA7: "\u2663",  # ♣
    0xA8: "\u2666",  # ♦
    0xA9: "\u2665",  # ♥
    0xAA: "\u2660",  # ♠
    0xAB: "\u2194",  # ↔
    0xAC: "\u2190",  # ←
    0xAD: "\u2191",  # ↑
    0xAE: "\u2192",  # →
    0xAF: "\u2193",  # ↓
    0xB0: "\u00b0",  # °
    0xB1: "\u00b1",  # ±
    0xB2: "\u2033",  # ″
    0xB3: "\u2265",  # ≥
    0xB4: "\u00d7",  # ×
    0xB5: "\u221d",  # ∝
    0xB6: "\u2202",  # ∂
    0xB7: "\u2022",  # • (Word's first bullet)
    0xB8: "\u00f7",  # ÷
    0xB9: "\u2260",  # ≠
    0xBA: "\u2261",  # ≡
    0xBB: "\u2248",  # ≈
    0xBC: "\u2026",  # …
    0xBF: "\u21b5",  # ↵
    0xC0: "\u2135",  # ℵ
    0xC1: "\u2111",  # ℑ
    0xC2: "\u211c",  # ℜ
    0xC3: "\u2118",  # ℘
    0xC4: "\u2297",  # ⊗
    0xC5: "\u2295",  # ⊕
    0xC6: "\u2205",  # ∅
    0xC7: "\u2229",  # ∩
    0xC8: "\u222a",  # ∪
    0xC9: "\u2283",  # ⊃
    0xCA: "\u2287",  # ⊇
    0xCB: "\u2284",  # ⊄
    0xCC: "\u2282",  # ⊂
    0xCD: "\u2286",  # ⊆
    0xCE: "\u2208",  # ∈
    0xCF: "\u2209",  # ∉
    0xD0: "\u2220",  # ∠
    0xD1: "\u2207",  # ∇
    0xD2: "\u00ae",  # ®
    0xD3: "\u00a9",  # ©
    0xD4: "\u2122",  # ™
    0xD5: "\u220f",  # ∏
    0xD6: "\u221a",  # √
    0xD7: "\u22c5",  # ⋅
    0xD8: "\u00ac",  # ¬
    0xD9: "\u2227",  # ∧
    0xDA: "\u2228",  # ∨
    0xDB: "\u21d4",  # ⇔
    0xDC: "\u21d0",  # ⇐
    0xDD: "\u21d1",  # ⇑
    0xDE: "\u21d2",  # ⇒
    0xDF: "\u21d3",  # ⇓
    0xE0: "\u25ca",  # ◊
    0xE1: "\u27e8",  # ⟨
    0xE2: "\u00ae",  # ®
    0xE3: "\u00a9",  # ©
    0xE4: "\u2122",  # ™
    0xE5: "\u2211",  # ∑
    0xF1: "\u27e9",  # ⟩
    0xF2: "\u222b",  # ∫
    0xF3: "\u2320",  # ⌠
    0xF5: "\u2321",  # ⌡
}

WINGDINGS = {
    0x22: "\u2702",  # ✂
    0x28: "\u260e",  # ☎
    0x29: "\u2706",  # ✆
    0x2A: "\u2709",  # ✉
    0x36: "\u231b",  # ⌛
    0x3F: "\u270d",  # ✍
    0x41: "\u270c",  # ✌
    0x43: "\U0001f44d",  # 👍
    0x44: "\U0001f44e",  # 👎
    0x45: "\u261c",  # ☜
    0x46: "\u261e",  # ☞
    0x47: "\u261d",  # ☝
    0x48: "\u261f",  # ☟
    0x4A: "\u263a",  # ☺ (the "J" of e-mails written in Word)
    0x4B: "\U0001f610",  # 😐
    0x4C: "\u2639",  # ☹
    0x4E: "\u2620",  # ☠
    0x51: "\u2708",  # ✈
    0x52: "\u263c",  # ☼
    0x54: "\u2744",  # ❄
    0x56: "\u271e",  # ✞
    0x58: "\u2720",  # ✠
    0x59: "\u2721",  # ✡
    0x5A: "\u262a",  # ☪
    0x5B: "\u262f",  # ☯
    0x5D: "\u2638",  # ☸
    **{0x5E + n: chr(0x2648 + n) for n in range(12)},  # ♈ to ♓
    # Bullets and boxes.
    0x6C: "\u25cf",  # ●
    0x6D: "\u274d",  # ❍
    0x6E: "\u25a0",  # ■
    0x6F: "\u25a1",  # □
    0x71: "\u2751",  # ❑
    0x72: "\u2752",  # ❒
    0x73: "\u2b27",  # ⬧
    0x74: "\u29eb",  # ⧫
    0x75: "\u25c6",  # ◆
    0x76: "\u2756",  # ❖
    0x77: "\u2b25",  # ⬥
    0x78: "\u2327",  # ⌧
    0x7A: "\u2318",  # ⌘
    # Numbers in circles: ⓪, ① to ⑩, ⓿, ❶ to ❿.
    0x80: "\u24ea",
    **{0x81 + n: chr(0x2460 + n) for n in range(10)},
    0x8B: "\u24ff",
    **{0x8C + n: chr(0x2776 + n) for n in range(10)},
    0x9E: "\u00b7",  # ·
    0x9F: "\u2022",  # •
    0xA1: "\u25cb",  # ○
    0xA4: "\u25c9",  # ◉
    0xA5: "\u25ce",  # ◎
    0xA7: "\u25aa",  # ▪ (Word's third bullet)
    0xA8: "\u25fb",  # ◻
    0xAA: "\u2726",  # ✦
    0xAB: "\u2605",  # ★
    0xAC: "\u2736",  # ✶
    0xAD: "\u2734",  # ✴
    0xAE: "\u2739",  # ✹
    0xAF: "\u2735",  # ✵
    0xB1: "\u2316",  # ⌖
    0xB5: "\u272a",  # ✪
    0xB6: "\u2730",  # ✰
    **{0xB7 + n: chr(0x1F550 + n) for n in range(12)},  # 🕐 to 🕛
    0xD5: "\u232b",  # ⌫
    0xD6: "\u2326",  # ⌦
    # Arrows.
    0xD8: "\u27a2",  # ➢ (Word's arrow bullet)
    0xDF: "\u2190",  # ←
    0xE0: "\u2192",  # →
    0xE1: "\u2191",  # ↑
    0xE2: "\u2193",  # ↓
    0xE8: "\u2794",  # ➔
    0xEF: "\u21e6",  # ⇦
    0xF0: "\u21e8",  # ⇨
    0xF1: "\u21e7",  # ⇧
    0xF2: "\u21e9",  # ⇩
    0xF3: "\u2b04",  # ⬄
    0xF4: "\u21f3",  # ⇳
    # Check marks and ballot boxes.
    0xFB: "\u2718",  # ✘
    0xFC: "\u2714",  # ✔
    0xFD: "\u2612",  # ☒
    0xFE: "\u2611",  # ☑
}

FONTS = {"symbol": SYMBOL, "wingdings": WINGDINGS}


def symbol(font: str, char: str) -> str:
    """The character `w:sym` draws with `font` and the hexadecimal code `char`; "" for a
    font or code without a known character."""
    table = FONTS.get(font.strip().lower())
    if table is None or not 0 < len(char) <= 4:
        return ""
    try:
        code = int(char, 16)
    except ValueError:
        return ""
    if 0xF000 <= code <= 0xF0FF:  # the font's byte, in the range Windows gives symbol fonts
        code -= 0xF000
    return table.get(code, "")
