"""decision_store: an AI agent's decisions, their corrections and
supersessions, and the context graph it plans from, in one SQLite file
(or a PostgreSQL database that agents on many hosts share).

The same Rust library as the ``dstore`` command, so Python and Rust agents
share files::

    from decision_store import Decision, Store, new_plan_id

    with Store.open("agent.db") as store:
        plan = new_plan_id()
        root = Decision.create(plan, "prompt_definition", 0, chosen_option="add rate limiting")
        store.insert(root)
"""

from ._native import Decision, DecisionTree, Store, new_decision_id, new_plan_id
from .errors import (
    BusyError,
    ConnectError,
    DecisionStoreError,
    IncompatibleVersionError,
    NotAStoreError,
    NotFoundError,
    ValidationError,
)

__all__ = [
    "BusyError",
    "ConnectError",
    "Decision",
    "DecisionStoreError",
    "DecisionTree",
    "IncompatibleVersionError",
    "NotAStoreError",
    "NotFoundError",
    "Store",
    "ValidationError",
    "new_decision_id",
    "new_plan_id",
]
