"""What kinds of problem a sync meets, and what members are told of each: one plain
sentence. The technical message (a status code, an exception's text) stays on the sync
and the connection, for operators in the admin. Plain Python: providers raise errors
of a kind (connectors/base.py), the models keep it.

Below them, what members are told of one file that is not imported because of the file
itself (its name, its links): the reason of its import, which is recorded as failed and
listed with the connection's failed files, for a person to act on."""


class Problem:
    """What kind of trouble a sync met."""

    UNKNOWN = "unknown"
    NEEDS_RECONNECT = "needs_reconnect"
    FOLDER_MISSING = "folder_missing"
    PROVIDER_UNAVAILABLE = "provider_unavailable"
    FOLDER_REFUSED = "folder_refused"
    INTERRUPTED = "interrupted"

    CHOICES = [
        (UNKNOWN, "Unknown"),
        (NEEDS_RECONNECT, "Needs reconnect"),
        (FOLDER_MISSING, "Folder gone or unreadable"),
        (PROVIDER_UNAVAILABLE, "Provider throttled or unavailable"),
        (FOLDER_REFUSED, "Folder refused by this server"),
        (INTERRUPTED, "Interrupted"),
    ]


_TEXTS = {
    Problem.NEEDS_RECONNECT: (
        "The sign-in to {provider} has expired or was withdrawn: connect the folder again to go on."
    ),
    Problem.FOLDER_MISSING: (
        "The folder is gone or can no longer be read (deleted, moved or renamed): put it "
        "back, or connect it where it is now."
    ),
    Problem.PROVIDER_UNAVAILABLE: (
        "{provider} is busy or cannot be reached just now; the sync tries again by itself."
    ),
    Problem.FOLDER_REFUSED: (
        "This server is not allowed to read this folder (any more); an operator must allow "
        "it before it syncs again."
    ),
    Problem.INTERRUPTED: "The sync was interrupted; another one carries on by itself.",
    Problem.UNKNOWN: ("The sync failed. It will be tried again later; operators have the details."),
}


def problem_text(kind: str, *, provider: str) -> str:
    """The sentence members read for a problem of `kind` with a `provider` connection
    ("OneDrive", "Local folder"); an unknown or unrecorded kind reads as UNKNOWN."""
    text = _TEXTS.get(kind) or _TEXTS[Problem.UNKNOWN]
    return text.format(provider=provider)


# --- One file -------------------------------------------------------------------------

FILE_NAME_NOT_UTF8 = "The file name is not valid UTF-8 and cannot be imported; rename the file."
FILE_HARD_LINKED = (
    "The file has more than one hard link, so it may also be a file outside the connected "
    "folder, and is not imported; put a copy of it in the folder instead."
)


def file_name_refused(refusal: str) -> str:
    """The reason of a file whose name an upload would refuse for `refusal` (the
    upload's own words: "The file name contains control characters.")."""
    return f"{refusal} It is not imported; rename the file to import it."
