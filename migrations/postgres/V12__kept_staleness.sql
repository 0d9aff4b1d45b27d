-- decision-store schema for PostgreSQL, version 12: staleness and
-- calibration kept, not recomputed. As
-- migrations/sqlite/V12__kept_staleness.sql.
ALTER TABLE uko_nodes ADD COLUMN current_version TEXT COLLATE "C";

CREATE TABLE snapshot_refs (
    resource         TEXT COLLATE "C" NOT NULL,
    decision_id      TEXT COLLATE "C" NOT NULL,
    position         BIGINT NOT NULL,
    recorded_version TEXT COLLATE "C",
    moved            BIGINT NOT NULL,
    PRIMARY KEY (resource, decision_id, position)
);

CREATE TABLE downstream_refs (
    target TEXT COLLATE "C" NOT NULL,
    source TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (target, source)
);

CREATE TABLE risk (
    decision_id TEXT COLLATE "C" PRIMARY KEY,
    plan_id     TEXT COLLATE "C",
    sequence    BIGINT NOT NULL,
    effective   BIGINT NOT NULL,
    moved       BIGINT NOT NULL,
    support     BIGINT NOT NULL
);
CREATE INDEX risk_stale ON risk (plan_id, sequence) WHERE moved > 0;
CREATE INDEX risk_at ON risk (plan_id, sequence, decision_id) WHERE moved = 0;

CREATE TABLE plan_risk (
    plan_id            TEXT COLLATE "C" PRIMARY KEY,
    resources          BIGINT NOT NULL,
    stale              BIGINT NOT NULL,
    stale_overturned   BIGINT NOT NULL,
    at_risk            BIGINT NOT NULL,
    at_risk_overturned BIGINT NOT NULL
);

CREATE TABLE calibration_sums (
    plan_id         TEXT COLLATE "C" NOT NULL,
    decision_type   TEXT COLLATE "C" NOT NULL,
    bin             BIGINT NOT NULL,
    decisions       BIGINT NOT NULL,
    held            BIGINT NOT NULL,
    confidence      BIGINT NOT NULL,
    squares         BIGINT NOT NULL,
    held_confidence BIGINT NOT NULL,
    PRIMARY KEY (plan_id, decision_type, bin)
);

CREATE TABLE kept_state (
    id             BIGINT PRIMARY KEY CHECK (id = 1),
    built          BIGINT NOT NULL,
    backward_links BIGINT NOT NULL
);
INSERT INTO kept_state (id, built, backward_links)
SELECT 1, CASE WHEN NOT EXISTS (SELECT 1 FROM decisions) AND NOT EXISTS (SELECT 1 FROM uko_nodes) THEN 1 ELSE 0 END, 0;
