-- decision-store schema for PostgreSQL, version 3: nothing to do.
--
-- SQLite's version 3 rewrites the decision_type CHECK because SQLite builds
-- an index for an IN list on every INSERT; PostgreSQL evaluates the list
-- directly. The version exists so that both dialects count the same.
SELECT 1;
