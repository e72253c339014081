"""Run as a program against a SQLite database (the demo's settings): searches through the
FTS5 path and prints what they found as JSON, for tests/retrieval/test_search_sqlite.py.

    DATABASE_URL=sqlite:///… python -m tests.support.sqlite_search
"""

import json
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from django.db import connection  # noqa: E402
from django.test import override_settings  # noqa: E402

from documents.models import Chunk, Document, Organisation  # noqa: E402
from documents.services.content import document_chunks_upsert  # noqa: E402
from documents.services.search_index import chunks_search_index_refresh  # noqa: E402
from retrieval.embedding import get_embedder, pack_vector  # noqa: E402
from retrieval.search import documents_search  # noqa: E402
from tests.support.known_items import (  # noqa: E402
    Fts5Baseline,
    known_items,
    mrr,
    real_world_chunks,
)
from tests.support.runs import document_with_chunks  # noqa: E402


def main() -> None:
    ours = Organisation.objects.create(slug="ours", name="ours", page_limit=10**6)
    theirs = Organisation.objects.create(slug="theirs", name="theirs", page_limit=10**6)
    names = {}
    for name, texts in {
        "tide.pdf": ["the high tide table for March", "the keeper\u2019s e-mail"],
        "table.pdf": ["a table of high and low water"],
        "alphabet.pdf": ["an alphabet of the sea"],
    }.items():
        names[document_with_chunks(ours, name, texts).id] = name
    document_with_chunks(theirs, "theirs.pdf", ["the tide table of another"])
    # A newer version written but not settled: its words are not found.
    tide = Document.objects.get(filename="tide.pdf")
    Document.objects.filter(id=tide.id).update(version=2)
    tide.refresh_from_db()
    document_chunks_upsert(
        document=tide,
        start=0,
        texts=["an unsettled anchor"],
        vectors=[pack_vector(v) for v in get_embedder().embed(["an unsettled anchor"])],
        model=get_embedder().name,
    )

    def found(q):
        return [
            names.get(h.document_id, "?") for h in documents_search(organisation=ours, query=q).hits
        ]

    answers = {
        q: found(q)
        for q in [
            "tide",
            "alphabets",
            "high table",
            '"tide table"',
            "high table -tide",
            "high table -keeper",
            "march or water",
            "email",
            '"keepers e mail"',
            "keeper's e-mail",
            "anchor",
            "water tide",
        ]
    }
    # One document searched with the embeddings ranking (its id given to the exact scan).
    table = Document.objects.get(filename="table.pdf")
    with override_settings(PAPERLANE_SEARCH_FUSE_EMBEDDINGS="always"):
        one = documents_search(organisation=ours, query="high water", document_id=table.id)
    answers["high water in table.pdf, by meaning too"] = [names[h.document_id] for h in one.hits]
    # One long document loaded first, with more chunks holding the word than are read.
    terns = Organisation.objects.create(slug="terns", name="terns", page_limit=10**6)
    long = document_with_chunks(terns, "long.pdf", [f"the tern {n}" for n in range(10)])
    short = [document_with_chunks(terns, f"{n}.pdf", [f"a tern {n}"]) for n in range(4)]
    with override_settings(PAPERLANE_SEARCH_MATCHES_RANKED=5):
        hits = documents_search(organisation=terns, query="tern").hits
    answers["tern in five documents"] = sorted(str(h.document_id) for h in hits)
    answers["tern documents"] = sorted(str(d.id) for d in [long, *short])
    # The triggers keep the index in step: a chunk changed, then one removed.
    Chunk.objects.filter(document__filename="alphabet.pdf").update(text="a glossary")
    answers["glossary"] = found("glossary")
    answers["alphabet after the change"] = found("alphabet")
    Chunk.objects.filter(document__filename="alphabet.pdf").delete()
    answers["glossary after the removal"] = found("glossary")

    # documents_chunk's rowids renumbered (a VACUUM after deletes), then the table remade as
    # a migration altering Chunk does (its triggers dropped) and the index brought back.
    reef = Organisation.objects.create(slug="reef", name="reef", page_limit=10**6)
    gone = [document_with_chunks(reef, f"gone-{n}.pdf", [f"kelp {n}"] * 5) for n in range(3)]
    coral = document_with_chunks(reef, "coral.pdf", ["the kelp forest", "the coral reef"])
    Chunk.objects.filter(document__in=gone).delete()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM")

    def reef_hits(q):
        hits = documents_search(organisation=reef, query=q).hits
        return [[str(h.document_id), h.chunk_index, h.snippet] for h in hits]

    answers["reef after a vacuum"] = reef_hits("reef")
    with connection.schema_editor() as editor:
        editor._remake_table(Chunk)
    answers["search_index after the remake"] = chunks_search_index_refresh()
    urchin = document_with_chunks(reef, "urchin.pdf", ["a sea urchin"])
    answers["reef after the remake"] = reef_hits("reef")
    answers["urchin after the remake"] = reef_hits("urchin")
    answers["reef expected"] = [[str(coral.id), 1, "the coral reef"]]
    answers["urchin expected"] = [[str(urchin.id), 0, "a sea urchin"]]

    corpus = real_world_chunks()
    items = known_items(corpus)
    org = Organisation.objects.create(slug="known", name="known", page_limit=10**6)
    keys = {document_with_chunks(org, key, chunks).id: key for key, chunks in corpus.items()}

    def search(query):
        return [keys[h.document_id] for h in documents_search(organisation=org, query=query).hits]

    print(
        json.dumps(
            {
                "answers": answers,
                "mrr": mrr(items, search),
                "fts5": mrr(items, Fts5Baseline(corpus).search),
            }
        )
    )


if __name__ == "__main__":
    main()
