"""The vocabulary of an organisation's searchable documents (`SearchWord`): each word and
how many of its searchable documents hold it, for search's "Did you mean" suggestions
(retrieval/suggest.py).

In the transaction that makes a version searchable or takes it out of search, the words
only the version coming in holds and those only the version leaving holds are written
down (`VocabularyChange`, one row), read from their chunks while both are there; making
the same version searchable again writes nothing. The sweeper adds them to the counts
(`vocabulary_apply`), many documents' changes in one statement: a word as common as
"report" is counted once a pass, not once a document, and settling a one-page document
costs one row. A word no document holds any more goes.

A version's words are read by PostgreSQL's own text parser (the `paperlane_words`
configuration, migration 0022: words of letters, hyphenated words' parts, lower-cased,
unstemmed), 3 to 32 letters, not Chinese, Japanese or Korean (they have no spelling to
correct), and at most WORDS_PER_VERSION of them, those in the most chunks first: a
5,000-page scan read badly cannot fill the vocabulary with noise.
"""

from collections.abc import Sequence

from django.db import connection, transaction

from core.cjk import SQL_CLASS
from documents.models import Chunk, Document, SearchWord, VocabularyChange

WORDS_PER_VERSION = 20_000
# The words kept: as short and as long as these (SearchWord.word holds 32).
MIN_LETTERS, MAX_LETTERS = 3, 32
# Changes added to the counts in one transaction.
CHANGES_PER_APPLY = 500

_CHUNKS = Chunk._meta.db_table
_DOCUMENTS = Document._meta.db_table
_WORDS = SearchWord._meta.db_table
_CHANGES = VocabularyChange._meta.db_table

# The words of the chunks of version `version` of document `document` (SQL names),
# those in the most chunks first, ties by spelling: the same chunks give the same words.
_VERSION_WORDS = f"""
    SELECT lexeme FROM (
        SELECT v.lexeme, count(*) AS chunks
        FROM {_CHUNKS} c, unnest(to_tsvector('paperlane_words', c.text)) v
        WHERE c.document_id = {{document}} AND c.version = {{version}}
        GROUP BY v.lexeme) w
    WHERE length(lexeme) BETWEEN {MIN_LETTERS} AND {MAX_LETTERS}
      AND lexeme !~ '{SQL_CLASS}'
    ORDER BY chunks DESC, lexeme
    LIMIT {WORDS_PER_VERSION}
"""

# Version %(version)s (none for NULL) coming into search in place of the searchable one:
# the words only it holds, and those only the one leaving holds.
_CHANGE = f"""
    WITH d AS (SELECT id, organisation_id, searchable_version FROM {_DOCUMENTS}
               WHERE id = %(document)s),
         new AS ({_VERSION_WORDS.format(document="(SELECT id FROM d)", version="%(version)s")}),
         old AS ({
    _VERSION_WORDS.format(
        document="(SELECT id FROM d)", version="(SELECT searchable_version FROM d)"
    )
}),
         change AS (
             SELECT ARRAY(SELECT lexeme FROM new EXCEPT SELECT lexeme FROM old) AS added,
                    ARRAY(SELECT lexeme FROM old EXCEPT SELECT lexeme FROM new) AS removed)
    INSERT INTO {_CHANGES} (organisation_id, added, removed)
    SELECT d.organisation_id, added, removed FROM d, change
    WHERE (SELECT searchable_version FROM d) IS DISTINCT FROM %(version)s
      AND (cardinality(added) > 0 OR cardinality(removed) > 0)
"""

# The oldest changes taken (another sweeper skips them) and summed by word; each count
# changed once, in one order (two sweepers lock their words alike). Says how many were
# taken and which counts are now 0.
_APPLY = f"""
    WITH taken AS (
             DELETE FROM {_CHANGES} WHERE id IN (
                 SELECT id FROM {_CHANGES} ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED)
             RETURNING organisation_id, added, removed),
         summed AS (
             SELECT organisation_id, word, sum(change)::int AS change FROM (
                 SELECT organisation_id, unnest(added) AS word, 1 AS change FROM taken
                 UNION ALL
                 SELECT organisation_id, unnest(removed), -1 FROM taken) each
             GROUP BY organisation_id, word
             HAVING sum(change) <> 0),
         counted AS (
             INSERT INTO {_WORDS} (organisation_id, word, documents)
             SELECT organisation_id, word, change FROM summed ORDER BY organisation_id, word
             ON CONFLICT (organisation_id, word)
             DO UPDATE SET documents = {_WORDS}.documents + EXCLUDED.documents
             RETURNING organisation_id, word, documents)
    SELECT (SELECT count(*) FROM taken),
           ARRAY(SELECT organisation_id FROM counted WHERE documents = 0),
           ARRAY(SELECT word FROM counted WHERE documents = 0)
"""
# The counts now 0 go. (Found by the words the change returned: an index on `documents`
# would make every count's update write every index again.) A count below 0 stays: it is
# a document's leaving counted before its coming, which a later pass adds.
_PRUNE = f"""
    DELETE FROM {_WORDS} w USING unnest(%s::int[], %s::text[]) AS z(organisation_id, word)
    WHERE w.organisation_id = z.organisation_id AND w.word = z.word AND w.documents = 0
"""


def vocabulary_change(*, document_id, version: int | None) -> None:
    """Version `version` of the document becomes its searchable one (None: it leaves
    search): write down the words it brings and those the version searchable until now
    takes away. Call in the transaction that changes `searchable_version`, before it
    does, while both versions' chunks are there."""
    with connection.cursor() as cursor:
        cursor.execute(_CHANGE, {"document": document_id, "version": version})


def vocabulary_leave(*, document_ids: Sequence) -> None:
    """The documents leave search: their searchable versions' words count once less."""
    for document_id in document_ids:
        vocabulary_change(document_id=document_id, version=None)


@transaction.atomic
def vocabulary_apply(*, limit: int = CHANGES_PER_APPLY) -> int:
    """Add the oldest `limit` changes written down to the organisations' word counts (the
    sweeper's, each pass). Returns how many were added."""
    with connection.cursor() as cursor:
        cursor.execute(_APPLY, [limit])
        taken, organisations, words = cursor.fetchone()
        if words:
            cursor.execute(_PRUNE, [organisations, words])
    return taken


# Every searchable document's words, counted by organisation.
_REBUILD = f"""
    INSERT INTO {_WORDS} (organisation_id, word, documents)
    SELECT d.organisation_id, w.lexeme, count(*)
    FROM {_DOCUMENTS} d
    CROSS JOIN LATERAL ({
    _VERSION_WORDS.format(document="d.id", version="d.searchable_version")
}) w
    WHERE d.searchable_version IS NOT NULL AND d.deleted_at IS NULL
    GROUP BY d.organisation_id, w.lexeme
"""


@transaction.atomic
def vocabulary_rebuild() -> int:
    """Count every organisation's vocabulary again from its searchable documents: after
    chunks were loaded in bulk, which no settle counted (`manage.py search_index
    --vocabulary`). Changes not yet added are dropped: what they change is in the count.
    Documents settling meanwhile wait, then write their changes as usual. Returns how
    many words there are."""
    with connection.cursor() as cursor:
        cursor.execute(f"LOCK TABLE {_CHANGES} IN EXCLUSIVE MODE")
        cursor.execute(f"DELETE FROM {_CHANGES}")
        cursor.execute(f"DELETE FROM {_WORDS}")
        cursor.execute(_REBUILD)
        return cursor.rowcount
