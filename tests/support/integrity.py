"""What every worker test checks once its runs have ended: each succeeded exactly once."""

from collections import Counter

from django.db.models import Count

from documents.models import Chunk, Document, UsageEntry
from pipeline.models import ImportRun


def integrity_problems(runs: list[ImportRun], *, pages: int) -> dict[str, object]:
    """Everything wrong with `runs` (each a `pages`-page document): empty when every run
    succeeded, each document has its chunks once (0..n-1, as many as it counts) and one
    ledger entry of `pages` pages."""
    problems: dict[str, object] = {}
    statuses = Counter(r.status for r in runs)
    if statuses != {"succeeded": len(runs)}:
        problems["statuses"] = dict(statuses)
    documents = {r.document_id for r in runs}
    duplicated = (
        Chunk.objects.filter(document__in=documents)
        .values("document", "version", "index")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
    )
    if duplicated:
        problems["duplicate_chunks"] = list(duplicated)
    for document in Document.objects.filter(id__in=documents):
        indexes = sorted(
            Chunk.objects.filter(document=document, version=document.version).values_list(
                "index", flat=True
            )
        )
        if not indexes or indexes != list(range(document.chunk_count)):
            problems.setdefault("chunk_mismatch", []).append(str(document.id))
    charges = Counter(
        UsageEntry.objects.filter(document__in=documents).values_list("document", "pages")
    )
    expected = {(d, pages): 1 for d in documents}
    if charges != Counter(expected):
        problems["charges"] = {str(k): v for k, v in charges.items() if expected.get(k) != v}
        problems["uncharged"] = len(documents - {d for d, _ in charges})
    return problems
