"""The exceptions of decision_store: every one is a DecisionStoreError."""


class DecisionStoreError(Exception):
    """Base of every error the store raises."""


class ValidationError(DecisionStoreError, ValueError):
    """Invalid input; the message names the field (``confidence_score: ...``)."""


class NotAStoreError(DecisionStoreError):
    """The file is not a decision store (another application's, or not SQLite), or does not exist yet."""


class IncompatibleVersionError(DecisionStoreError):
    """The store's schema is newer than this library, or needs an upgrade that a read-only open cannot make."""


class BusyError(DecisionStoreError):
    """Another writer held the store past the busy timeout."""


class ConnectError(DecisionStoreError, ConnectionError):
    """A PostgreSQL server that cannot be reached or refuses the login, or a
    database that holds another application's tables (``Store.connect``)."""


class NotFoundError(DecisionStoreError, LookupError):
    """No such decision or plan."""
