"""How a stage says what went wrong. The engine decides what happens next."""


class StageError(Exception):
    code = "stage_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code


class PermanentError(StageError):
    """Retrying cannot help (bad input, over quota): the run fails at once.

    The message is shown to the person who uploaded the document.
    """

    code = "permanent_error"


class TransientError(StageError):
    """Worth trying again later (network, timeouts, a busy provider)."""

    code = "transient_error"


class LeaseLost(Exception):
    """Another worker (or the sweeper, or a cancel) took the run from this one."""
