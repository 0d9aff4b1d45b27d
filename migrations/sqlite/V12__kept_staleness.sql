-- decision-store schema, version 12: staleness and calibration kept, not
-- recomputed (src/store/tables/kept.rs). What a page of the web view, a
-- tool or a command asks about staleness or calibration is read from
-- these tables, kept up to date by the transactions that change decisions
-- or nodes, instead of computed from the whole store.

-- A node's current version (its own, or the hash of its views): what a
-- recorded version is compared with. Filled by the library on every node
-- write, and for the nodes stored before this version when the kept state
-- is built.
ALTER TABLE uko_nodes ADD COLUMN current_version TEXT;

-- Every resource a decision's snapshot recorded, by URI: what a node's
-- change has to look at. `position`: its place in the snapshot's list (a
-- URI may be listed twice); `moved`: its version moved, or it is gone.
CREATE TABLE snapshot_refs (
    resource         TEXT NOT NULL,
    decision_id      TEXT NOT NULL,
    position         INTEGER NOT NULL,
    recorded_version TEXT,
    moved            INTEGER NOT NULL,
    PRIMARY KEY (resource, decision_id, position)
) WITHOUT ROWID;

-- Every downstream link, by its target: who names a decision downstream.
CREATE TABLE downstream_refs (
    target TEXT NOT NULL,
    source TEXT NOT NULL,
    PRIMARY KEY (target, source)
) WITHOUT ROWID;

-- The decisions that are stale or at risk (and the ids, stored or not,
-- that a risky decision names downstream). `moved`: how many of its
-- recorded resources moved; `support`: how many of its predecessors (its
-- parent, the decisions naming it downstream) are stale and standing, or
-- at risk. No row: neither.
CREATE TABLE risk (
    decision_id TEXT PRIMARY KEY NOT NULL,
    plan_id     TEXT,  -- NULL for an id that no stored decision has
    sequence    INTEGER NOT NULL,
    effective   INTEGER NOT NULL,
    moved       INTEGER NOT NULL,
    support     INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX risk_stale ON risk (plan_id, sequence) WHERE moved > 0;
CREATE INDEX risk_at ON risk (plan_id, sequence, decision_id) WHERE moved = 0;

-- Per plan, the decisions stale and at risk, standing or overturned
-- (plan '': the ids named downstream that no stored decision has), and the
-- resources its decisions recorded.
CREATE TABLE plan_risk (
    plan_id            TEXT PRIMARY KEY NOT NULL,
    resources          INTEGER NOT NULL,
    stale              INTEGER NOT NULL,
    stale_overturned   INTEGER NOT NULL,
    at_risk            INTEGER NOT NULL,
    at_risk_overturned INTEGER NOT NULL
) WITHOUT ROWID;

-- Calibration's sums per plan ('*': the whole store), type and confidence
-- bin (-1: no confidence), confidences in units of 1e-5.
CREATE TABLE calibration_sums (
    plan_id         TEXT NOT NULL,
    decision_type   TEXT NOT NULL,
    bin             INTEGER NOT NULL,
    decisions       INTEGER NOT NULL,
    held            INTEGER NOT NULL,
    confidence      INTEGER NOT NULL,
    squares         INTEGER NOT NULL,
    held_confidence INTEGER NOT NULL,
    PRIMARY KEY (plan_id, decision_type, bin)
) WITHOUT ROWID;

-- `built`: the tables above hold the store's state (a store upgraded to
-- this version has them built at its first writable open).
-- `backward_links`: downstream links to a decision stored before their
-- source, the only links that can close a cycle.
CREATE TABLE kept_state (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    built          INTEGER NOT NULL,
    backward_links INTEGER NOT NULL
);
INSERT INTO kept_state (id, built, backward_links)
SELECT 1, NOT EXISTS (SELECT 1 FROM decisions) AND NOT EXISTS (SELECT 1 FROM uko_nodes), 0;
