-- decision-store schema for PostgreSQL, version 2: the integrity columns and
-- kept counts of migrations/sqlite/V2__integrity.sql (see docs/integrity.md).
--
-- No PostgreSQL store was ever written at version 1, so there are no rows to
-- hash here: every row gets its hashes from the library when it is inserted,
-- with the same bytes as on SQLite.

ALTER TABLE decisions ADD COLUMN depth BIGINT;
ALTER TABLE decisions ADD COLUMN content_hash TEXT;
ALTER TABLE decisions ADD COLUMN chain_index BIGINT;
ALTER TABLE decisions ADD COLUMN chain_hash TEXT;
ALTER TABLE decisions ADD COLUMN log_index BIGINT;

ALTER TABLE supersessions ADD COLUMN plan_id TEXT;
ALTER TABLE supersessions ADD COLUMN content_hash TEXT;
ALTER TABLE supersessions ADD COLUMN chain_index BIGINT;
ALTER TABLE supersessions ADD COLUMN chain_hash TEXT;
ALTER TABLE supersessions ADD COLUMN log_index BIGINT;

CREATE TABLE plans (
    plan_id           TEXT PRIMARY KEY NOT NULL,
    decisions         BIGINT NOT NULL,
    corrections       BIGINT NOT NULL,
    superseded        BIGINT NOT NULL,
    max_depth         BIGINT NOT NULL,
    first_decision_id TEXT NOT NULL,
    last_decision_id  TEXT NOT NULL,
    entries           BIGINT NOT NULL,
    head_hash         TEXT NOT NULL
);

CREATE TABLE decision_type_counts (
    decision_type TEXT PRIMARY KEY NOT NULL,
    decisions     BIGINT NOT NULL
);

CREATE TABLE store_log (
    id      BIGINT PRIMARY KEY CHECK (id = 1),
    entries BIGINT NOT NULL
);

DROP INDEX decisions_by_parent;

-- A decision is superseded once: the primary key refuses a second link, and
-- PostgreSQL has no INSERT OR REPLACE to go around it.
CREATE TRIGGER plans_no_delete BEFORE DELETE ON plans
    FOR EACH ROW EXECUTE FUNCTION dstore_append_only();
CREATE TRIGGER plans_no_truncate BEFORE TRUNCATE ON plans
    FOR EACH STATEMENT EXECUTE FUNCTION dstore_append_only();
