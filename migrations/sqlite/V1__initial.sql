-- decision-store schema, version 1.
-- Readable with a stock sqlite3 shell: ids are ULID text, nested fields are
-- plain JSON text. Applied migrations are never edited; add V2__... instead.

-- Marks the file as a decision store ("DSTR"), so other SQLite files are refused.
PRAGMA application_id = 1146311762;

CREATE TABLE decisions (
    decision_id             TEXT PRIMARY KEY NOT NULL,
    plan_id                 TEXT NOT NULL,
    parent_decision_id      TEXT,  -- in the same plan, stored before (checked on insert by the library)
    sequence                INTEGER NOT NULL CHECK (sequence >= 0),
    decision_type           TEXT NOT NULL CHECK (decision_type IN (
                                'prompt_definition', 'invariant_enforced', 'strategy_choice',
                                'implementation_choice', 'resource_selection', 'subplan_spawn',
                                'subplan_parallel_spawn', 'tool_invocation', 'error_recovery',
                                'validation_response', 'user_intervention')),
    chosen_option           TEXT NOT NULL,
    rationale               TEXT NOT NULL,
    confidence_score        REAL CHECK (confidence_score BETWEEN 0.0 AND 1.0),
    alternatives            TEXT NOT NULL,  -- JSON array of {option, rationale}
    context_snapshot        TEXT NOT NULL,  -- JSON {hash, resources, actor_state_ref}
    artifacts_produced      TEXT NOT NULL,  -- JSON array of {artifact_path, content_hash}
    corrects_decision_id    TEXT,  -- the correction link: same plan, stored before
    downstream_decision_ids TEXT NOT NULL,  -- JSON array of ULIDs, kept verbatim
    downstream_plan_ids     TEXT NOT NULL,  -- JSON array of ULIDs, kept verbatim
    metadata                TEXT NOT NULL,  -- JSON object
    UNIQUE (plan_id, sequence),
    CHECK (decision_type <> 'prompt_definition' OR parent_decision_id IS NULL),
    CHECK (parent_decision_id IS NOT decision_id AND corrects_decision_id IS NOT decision_id)
);
-- UNIQUE (plan_id, sequence) already serves "a plan in sequence order".
CREATE INDEX decisions_by_parent ON decisions (parent_decision_id) WHERE parent_decision_id IS NOT NULL;
CREATE INDEX decisions_by_corrected ON decisions (corrects_decision_id) WHERE corrects_decision_id IS NOT NULL;

-- Decision rows are append-only: an audit trail is never rewritten.
CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions
BEGIN
    SELECT RAISE(ABORT, 'append-only: decisions cannot be updated');
END;
CREATE TRIGGER decisions_no_delete BEFORE DELETE ON decisions
BEGIN
    SELECT RAISE(ABORT, 'append-only: decisions cannot be deleted');
END;

-- The one change allowed after insert: "decision_id was replaced by superseded_by".
-- A decision is superseded at most once; links are never changed or removed.
CREATE TABLE supersessions (
    decision_id   TEXT PRIMARY KEY NOT NULL REFERENCES decisions (decision_id),
    superseded_by TEXT NOT NULL REFERENCES decisions (decision_id),
    CHECK (superseded_by <> decision_id)
) WITHOUT ROWID;
CREATE INDEX supersessions_by_successor ON supersessions (superseded_by);

CREATE TRIGGER supersessions_in_plan BEFORE INSERT ON supersessions
BEGIN
    SELECT RAISE(ABORT, 'cross-plan superseded_by')
    WHERE (SELECT plan_id FROM decisions WHERE decision_id = NEW.decision_id)
       <> (SELECT plan_id FROM decisions WHERE decision_id = NEW.superseded_by);
END;
CREATE TRIGGER supersessions_no_update BEFORE UPDATE ON supersessions
BEGIN
    SELECT RAISE(ABORT, 'append-only: supersessions cannot be updated');
END;
CREATE TRIGGER supersessions_no_delete BEFORE DELETE ON supersessions
BEGIN
    SELECT RAISE(ABORT, 'append-only: supersessions cannot be deleted');
END;

-- UKO graph. Integer keys keep the edge table and its two indexes compact;
-- the uko_edge_list view shows edges by URI for people.
CREATE TABLE uko_nodes (
    node_id INTEGER PRIMARY KEY,
    uri     TEXT NOT NULL UNIQUE,
    domain  TEXT NOT NULL,
    kind    TEXT NOT NULL,
    label   TEXT NOT NULL
);

-- Renderings of a node at increasing detail.
CREATE TABLE uko_node_views (
    node_id INTEGER NOT NULL REFERENCES uko_nodes (node_id),
    depth   INTEGER NOT NULL CHECK (depth >= 0),
    content TEXT NOT NULL,
    PRIMARY KEY (node_id, depth)
) WITHOUT ROWID;

CREATE TABLE uko_edges (
    source_id INTEGER NOT NULL REFERENCES uko_nodes (node_id),
    target_id INTEGER NOT NULL REFERENCES uko_nodes (node_id),
    relation  TEXT NOT NULL,
    weight    REAL,
    PRIMARY KEY (source_id, relation, target_id)
) WITHOUT ROWID;
-- Outgoing traversal uses the primary key; incoming uses this index.
CREATE INDEX uko_edges_by_target ON uko_edges (target_id, relation, source_id);

CREATE VIEW uko_edge_list AS
SELECT s.uri AS source, t.uri AS target, e.relation, e.weight
FROM uko_edges e
JOIN uko_nodes s ON s.node_id = e.source_id
JOIN uko_nodes t ON t.node_id = e.target_id;
