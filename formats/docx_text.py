"""The text of a WordprocessingML part (body, header, footer, notes, comments) as a
person reads the page, from a streaming parser's events.

Text is what `w:t` elements hold, and the characters Word keeps as elements of a run: a
tab (`w:tab`, `w:ptab`), a line break, a non-breaking hyphen (read as "-"), a symbol
(`w:sym`, formats/docx_symbols.py). A `w:tab` outside a run is a tab stop's definition
(`w:pPr/w:tabs`), not a tab. A text box (`w:txbxContent`, in a drawing or a VML
picture) is read after the paragraph that anchors it, and of `mc:AlternateContent`
only the first branch, so a box drawn twice for old and new readers is read once.
A field is read as its result, never its instruction (`w:instrText`, `w:fldSimple`'s
attribute). Deleted and moved-away text (`w:del`, `w:moveFrom`) is not read; inserted
text is.
"""

from collections.abc import Callable

from formats.base import too_much_text
from formats.docx_package import W_STRICT, W
from formats.docx_symbols import symbol

_MC = "http://schemas.openxmlformats.org/markup-compatibility/2006"
_ALTERNATE = f"{_MC} AlternateContent"
_BRANCHES = (f"{_MC} Choice", f"{_MC} Fallback")
# An outline level of 9 is body text; 0 to 8 are heading levels ("Heading 1" is 0).
BODY_TEXT_LEVEL = 9
# The outline levels of headings, as w:outlineLvl writes them.
_HEADING_LEVELS = frozenset("012345678")
# Fields nested deeper than this are not followed (a field holds a few at most).
MAX_FIELD_DEPTH = 64
# The characters a run holds as elements of their own; a symbol's depends on its font.
_RUN_CHARACTERS = {"tab": "\t", "ptab": "\t", "br": "\n", "cr": "\n", "noBreakHyphen": "-"}
_RUN_ELEMENTS = frozenset([*_RUN_CHARACTERS, "sym"])


def local_name(name: str) -> str:
    """An element's name in the WordprocessingML namespace, whatever its prefix; "" for
    every other namespace."""
    namespace, _, local = name.rpartition(" ")
    return local if namespace in (W, W_STRICT) else ""


def attribute(attrs, name: str) -> str:
    """An attribute of the WordprocessingML namespace, in either vocabulary."""
    return attrs.get(f"{W} {name}") or attrs.get(f"{W_STRICT} {name}") or ""


def outline_level(value: str) -> int:
    """A w:outlineLvl value as a level; BODY_TEXT_LEVEL for body text or nonsense."""
    return int(value) if value in _HEADING_LEVELS else BODY_TEXT_LEVEL


class _Paragraph:
    """An open paragraph: its text, heading level, the runs open in it, and the blocks
    of the text boxes it anchors, read after it."""

    __slots__ = ("text", "level", "runs", "boxed")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.level: int | None = None
        self.runs = 0
        self.boxed: list[tuple[str, int | None]] | None = None  # None until it anchors one


class _Cell:
    __slots__ = ("blocks",)

    def __init__(self) -> None:
        self.blocks: list[str] = []


class _Row:
    __slots__ = ("cells",)

    def __init__(self) -> None:
        self.cells: list[str] = []


class PartText:
    """The text of a WordprocessingML part as it streams past, in document order, handed
    to `emit` a block at a time: a paragraph, or a table row (its cells joined by tabs,
    a cell's paragraphs and nested rows by newlines), with the paragraph's heading level
    (None for a row or a paragraph that is not a heading; `heading_styles` names the
    heading styles). The text taken in may not pass `budget` characters however it is
    split into paragraphs: one endless paragraph is refused as it grows."""

    def __init__(
        self,
        emit: Callable[[str, int | None], None],
        *,
        budget: int,
        heading_styles: dict[str, int] | None = None,
    ) -> None:
        self._emit = emit
        self._heading_styles = heading_styles or {}
        self._budget, self._left = budget, budget
        # The paragraphs, cells and rows open, outermost first: text boxes nest them.
        self._open: list[_Paragraph | _Cell | _Row] = []
        self._in_text = False
        self._changes = 0  # inside a tracked change of paragraph properties (the old ones)
        self._deleted = 0  # inside deleted or moved-away text
        # The complex fields open: whether each has reached its result.
        self._fields: list[bool] = []
        self._instructions = 0  # open fields still in their instruction
        self._too_deep = 0  # fields open past MAX_FIELD_DEPTH
        # The mc:AlternateContent open: whether a branch of each has been read.
        self._alternates: list[bool] = []
        self._skipped = 0  # the depth inside a branch that is not read

    def start(self, name: str, attrs) -> None:
        if self._skipped:
            self._skipped += 1
            return
        local = local_name(name)
        if local == "t":
            self._in_text = True
        elif not local:  # another vocabulary: a drawing's, or markup compatibility's
            if name == _ALTERNATE:
                self._alternates.append(False)
            elif name in _BRANCHES and self._alternates:
                if self._alternates[-1]:
                    self._skipped = 1
                self._alternates[-1] = True
        elif local == "r":
            if (paragraph := self._paragraph()) is not None:
                paragraph.runs += 1
        elif local == "p":
            self._open.append(_Paragraph())
        elif local in _RUN_ELEMENTS:
            paragraph = self._paragraph()
            if paragraph is not None and paragraph.runs and not self._hidden():
                if local == "sym":
                    character = symbol(attribute(attrs, "font"), attribute(attrs, "char"))
                else:
                    character = _RUN_CHARACTERS[local]
                if character:
                    self._take(paragraph, character)
        elif local in ("pStyle", "outlineLvl"):
            if (paragraph := self._paragraph()) is None or self._changes:
                return
            if local == "pStyle":
                paragraph.level = self._heading_styles.get(attribute(attrs, "val"))
            else:
                # The paragraph's own level, after its style in pPr: it overrides the style's.
                level = outline_level(attribute(attrs, "val"))
                paragraph.level = level if level < BODY_TEXT_LEVEL else None
        elif local == "pPrChange":
            self._changes += 1
        elif local in ("del", "moveFrom"):
            self._deleted += 1
        elif local == "fldChar":
            self._field(attribute(attrs, "fldCharType"))
        elif local == "tc":
            self._open.append(_Cell())
        elif local == "tr":
            self._open.append(_Row())

    def end(self, name: str) -> None:
        if self._skipped:
            self._skipped -= 1
            return
        local = local_name(name)
        if local == "t":
            self._in_text = False
            return
        if not local:
            if name == _ALTERNATE and self._alternates:
                self._alternates.pop()
            return
        top = self._open[-1] if self._open else None
        if local == "r":
            if isinstance(top, _Paragraph) and top.runs:
                top.runs -= 1
        elif local == "pPrChange":
            self._changes -= 1
        elif local in ("del", "moveFrom"):
            self._deleted = max(0, self._deleted - 1)
        elif local == "p" and isinstance(top, _Paragraph):
            self._open.pop()
            self._deliver("".join(top.text), top.level)
            for block, level in top.boxed or ():
                self._deliver(block, level)
        elif local == "tc" and isinstance(top, _Cell):
            self._open.pop()
            self._deliver("\n".join(text for text in top.blocks if text.strip()), None)
        elif local == "tr" and isinstance(top, _Row):
            self._open.pop()
            self._deliver("\t".join(top.cells), None)

    def text(self, data: str) -> None:
        if self._in_text and not (self._skipped or self._deleted or self._instructions):
            if self._open and isinstance(paragraph := self._open[-1], _Paragraph):
                self._take(paragraph, data)

    def _paragraph(self) -> _Paragraph | None:
        """The innermost open paragraph, if nothing has opened inside it since."""
        top = self._open[-1] if self._open else None
        return top if isinstance(top, _Paragraph) else None

    def _hidden(self) -> bool:
        """Whether what comes now is not on the page: deleted text, a field's instruction."""
        return bool(self._deleted or self._instructions)

    def _take(self, paragraph: _Paragraph, text: str) -> None:
        self._left -= len(text)
        if self._left < 0:
            raise too_much_text("The document", self._budget)
        paragraph.text.append(text)

    def _field(self, kind: str) -> None:
        """A complex field's begin, separate (its result follows) or end. Fields nested
        past MAX_FIELD_DEPTH are counted, not followed: a file of begins that never end
        holds no more than that."""
        if self._too_deep:
            self._too_deep += {"begin": 1, "end": -1}.get(kind, 0)
        elif kind == "begin" and len(self._fields) == MAX_FIELD_DEPTH:
            self._too_deep = 1
        elif kind == "begin":
            self._fields.append(False)
            self._instructions += 1
        elif kind == "separate" and self._fields and not self._fields[-1]:
            self._fields[-1] = True
            self._instructions -= 1
        elif kind == "end" and self._fields and not self._fields.pop():
            self._instructions -= 1

    def _deliver(self, block: str, level: int | None) -> None:
        """A finished block to what holds it: after the paragraph that anchors its text
        box, into its cell, a cell into its row, else out."""
        holder = self._open[-1] if self._open else None
        if holder is None:
            self._emit(block, level)
        elif isinstance(holder, _Paragraph):
            if holder.boxed is None:
                holder.boxed = []
            holder.boxed.append((block, level))
        elif isinstance(holder, _Cell):
            holder.blocks.append(block)
        elif isinstance(holder, _Row):
            holder.cells.append(block)
