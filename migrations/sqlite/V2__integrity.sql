-- decision-store schema, version 2: tamper evidence and kept counts.
--
-- Every decision and supersession row becomes an entry of a hash-chained
-- log: a content hash over the row's canonical encoding, its position and
-- chain hash in its plan's chain, and its position in the store's log (see
-- docs/integrity.md). The hash functions dstore_decision_hash,
-- dstore_supersession_hash and dstore_link are the library's own, registered
-- on the connection that runs this migration, so the rows of a version 1
-- file are hashed here, in the migration's transaction, with the same code
-- as every later insert. Existing rows enter their plan's chain in sequence
-- order, then the plan's supersessions in decision id order.

ALTER TABLE decisions ADD COLUMN depth INTEGER;          -- distance from the plan's root
ALTER TABLE decisions ADD COLUMN content_hash TEXT;      -- hex SHA-256 of the canonical encoding
ALTER TABLE decisions ADD COLUMN chain_index INTEGER;    -- 1-based position in the plan's chain
ALTER TABLE decisions ADD COLUMN chain_hash TEXT;        -- hex SHA-256(previous chain_hash, content_hash)
ALTER TABLE decisions ADD COLUMN log_index INTEGER;      -- 1-based position in the store's log

ALTER TABLE supersessions ADD COLUMN plan_id TEXT;
ALTER TABLE supersessions ADD COLUMN content_hash TEXT;
ALTER TABLE supersessions ADD COLUMN chain_index INTEGER;
ALTER TABLE supersessions ADD COLUMN chain_hash TEXT;
ALTER TABLE supersessions ADD COLUMN log_index INTEGER;

-- One row a plan: its chain head and the counts `dstore plans` shows,
-- kept by every insert so that listing plans reads no decision row.
CREATE TABLE plans (
    plan_id           TEXT PRIMARY KEY NOT NULL,
    decisions         INTEGER NOT NULL,
    corrections       INTEGER NOT NULL,
    superseded        INTEGER NOT NULL,
    max_depth         INTEGER NOT NULL,
    first_decision_id TEXT NOT NULL,
    last_decision_id  TEXT NOT NULL,
    entries           INTEGER NOT NULL,  -- decisions and supersessions in the chain
    head_hash         TEXT NOT NULL      -- chain_hash of the last entry
) WITHOUT ROWID;

-- Decisions by type, store-wide, for `dstore info`.
CREATE TABLE decision_type_counts (
    decision_type TEXT PRIMARY KEY NOT NULL,
    decisions     INTEGER NOT NULL
) WITHOUT ROWID;

-- The length of the store's log (the last log_index handed out).
CREATE TABLE store_log (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    entries INTEGER NOT NULL
);

-- Hash the rows of a version 1 file. ------------------------------------

DROP TRIGGER decisions_no_update;
DROP TRIGGER supersessions_no_update;

CREATE TEMP TABLE v2_depth AS
WITH RECURSIVE walk(id, depth) AS (
    SELECT decision_id, 0 FROM decisions WHERE parent_decision_id IS NULL
    UNION ALL
    SELECT d.decision_id, w.depth + 1 FROM decisions d JOIN walk w ON d.parent_decision_id = w.id
)
SELECT id, min(depth) AS depth FROM walk GROUP BY id;
CREATE UNIQUE INDEX temp.v2_depth_id ON v2_depth (id);
UPDATE decisions SET depth = (SELECT depth FROM v2_depth WHERE id = decisions.decision_id);

CREATE TEMP TABLE v2_entries AS
SELECT kind, id, plan_id, content_hash,
       row_number() OVER (PARTITION BY plan_id ORDER BY kind, sequence, id) AS chain_index
FROM (
    SELECT 0 AS kind, decision_id AS id, plan_id, sequence,
           dstore_decision_hash(decision_id, plan_id, parent_decision_id, sequence, decision_type,
                                chosen_option, rationale, confidence_score, alternatives, context_snapshot,
                                artifacts_produced, corrects_decision_id, downstream_decision_ids,
                                downstream_plan_ids, metadata) AS content_hash
    FROM decisions
    UNION ALL
    SELECT 1, s.decision_id, d.plan_id, 0, dstore_supersession_hash(d.plan_id, s.decision_id, s.superseded_by)
    FROM supersessions s JOIN decisions d ON d.decision_id = s.decision_id
);
CREATE UNIQUE INDEX temp.v2_entries_position ON v2_entries (plan_id, chain_index);

CREATE TEMP TABLE v2_chain AS
WITH RECURSIVE chain(plan_id, chain_index, chain_hash) AS (
    SELECT plan_id, chain_index, dstore_link(NULL, content_hash) FROM v2_entries WHERE chain_index = 1
    UNION ALL
    SELECT e.plan_id, e.chain_index, dstore_link(c.chain_hash, e.content_hash)
    FROM chain c JOIN v2_entries e ON e.plan_id = c.plan_id AND e.chain_index = c.chain_index + 1
)
SELECT e.kind, e.id, e.plan_id, e.content_hash, e.chain_index, c.chain_hash,
       row_number() OVER (ORDER BY e.plan_id, e.chain_index) AS log_index
FROM v2_entries e JOIN chain c ON c.plan_id = e.plan_id AND c.chain_index = e.chain_index;
CREATE UNIQUE INDEX temp.v2_chain_id ON v2_chain (kind, id);
CREATE UNIQUE INDEX temp.v2_chain_position ON v2_chain (plan_id, chain_index);

UPDATE decisions SET content_hash = c.content_hash, chain_index = c.chain_index,
                     chain_hash = c.chain_hash, log_index = c.log_index
FROM v2_chain c WHERE c.kind = 0 AND c.id = decisions.decision_id;
UPDATE supersessions SET plan_id = c.plan_id, content_hash = c.content_hash, chain_index = c.chain_index,
                         chain_hash = c.chain_hash, log_index = c.log_index
FROM v2_chain c WHERE c.kind = 1 AND c.id = supersessions.decision_id;

INSERT INTO plans (plan_id, decisions, corrections, superseded, max_depth, first_decision_id, last_decision_id,
                   entries, head_hash)
SELECT d.plan_id, count(*), count(d.corrects_decision_id),
       (SELECT count(*) FROM v2_chain c WHERE c.plan_id = d.plan_id AND c.kind = 1),
       coalesce(max(d.depth), 0), min(d.decision_id), max(d.decision_id),
       (SELECT max(chain_index) FROM v2_chain c WHERE c.plan_id = d.plan_id),
       (SELECT chain_hash FROM v2_chain c WHERE c.plan_id = d.plan_id ORDER BY chain_index DESC LIMIT 1)
FROM decisions d GROUP BY d.plan_id;

INSERT INTO decision_type_counts (decision_type, decisions)
SELECT decision_type, count(*) FROM decisions GROUP BY decision_type;

INSERT INTO store_log (id, entries) SELECT 1, (SELECT count(*) FROM v2_chain);

DROP TABLE temp.v2_chain;
DROP TABLE temp.v2_entries;
DROP TABLE temp.v2_depth;

-- Children are found in memory from a plan's rows, and the library checks a
-- parent by its primary key: nothing reads this index any more, and keeping
-- it cost 7 % of an import (measured: 2.36 s vs 2.20 s for 100k decisions).
DROP INDEX decisions_by_parent;

-- Append-only. ------------------------------------------------------------------

CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions
BEGIN
    SELECT RAISE(ABORT, 'append-only: decisions cannot be updated');
END;
CREATE TRIGGER supersessions_no_update BEFORE UPDATE ON supersessions
BEGIN
    SELECT RAISE(ABORT, 'append-only: supersessions cannot be updated');
END;

-- REPLACE deletes the conflicting row without firing the delete trigger.
-- A BEFORE INSERT trigger refuses it, but any such trigger on `decisions`
-- costs a fifth of the import time (measured, even one that does nothing),
-- so a replaced decision is detected by its hashes (`dstore check`) instead.
-- Supersessions are few: there the trigger costs nothing that shows.
CREATE TRIGGER supersessions_no_replace BEFORE INSERT ON supersessions
WHEN EXISTS (SELECT 1 FROM supersessions WHERE decision_id = NEW.decision_id)
BEGIN
    SELECT RAISE(ABORT, 'append-only: the decision is already superseded');
END;
CREATE TRIGGER plans_no_delete BEFORE DELETE ON plans
BEGIN
    SELECT RAISE(ABORT, 'append-only: plans cannot be deleted');
END;
