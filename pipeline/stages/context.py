"""What a stage body is given. The engine (`pipeline/engine.py`) provides it."""

from contextlib import AbstractContextManager
from typing import Protocol

from documents.models import Document
from pipeline.models import ImportRun


class StageContext(Protocol):
    @property
    def run(self) -> ImportRun:
        """The claimed run, with its document, organisation and reservation loaded."""

    @property
    def document(self) -> Document | None: ...

    @property
    def timeout(self) -> int:
        """The stage's time limit in seconds (its job is stopped past it)."""

    def check(self) -> None:
        """Stop (LeaseLost) if this worker no longer holds the run: cancelled or taken over.
        Asks the database: call it before each slow or paid step (a provider call)."""

    def progress(self, done: int, total: int) -> None:
        """Report `done` of `total` steps; shown to the uploader and operators (written
        at most every few hundred milliseconds: a short stage shows none)."""

    def checkpoint(self, done: int, total: int) -> AbstractContextManager[None]:
        """A transaction in which part of the stage's result is saved together with its
        progress, `done` of `total`; LeaseLost, and nothing of it is saved, if this worker
        no longer holds the run. What a stage writes before it completes goes here."""

    def skip(self, stage: str) -> None:
        """The run does not go through the optional `stage` (OCR for a document with no
        pages to read): completing passes over it."""

    def complete(self) -> AbstractContextManager[None]:
        """A transaction in which the stage's result is saved together with
        "the next stage is due"; the stage is done when it commits."""
