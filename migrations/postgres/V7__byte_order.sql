-- decision-store schema for PostgreSQL, version 7: text compared as bytes,
-- and the store's log row. SQLite's version 7 does nothing.
--
-- SQLite compares text with BINARY, byte by byte; a PostgreSQL column takes
-- the database's default collation, which is usually a language's (en_US:
-- case and punctuation weigh less than letters). The library orders by plan
-- id, decision id, URI and relation, takes min and max of id columns and
-- hashes plans in plan id order, so on a server with such a default the same
-- store would list, page and anchor differently than on SQLite. Every text
-- column becomes COLLATE "C" (byte order, as in SQLite): the ids and names
-- because of the above, the JSON, hashes and prose so that no column is left
-- to compare one way here and another way in SQLite. Only the collation
-- changes, so no table is rewritten; indexes on these columns are rebuilt and
-- constraints keep their names. A text column added by a later version must
-- say COLLATE "C" itself.
--
-- Version 2 created store_log without the one row SQLite's version 2 inserts
-- (id 1, the length of the log, which every write updates). It is inserted
-- here: with the last log_index handed out, which is 0 on a new database.

-- The view reads uko_nodes.uri and uko_edges.relation, whose type cannot
-- change under it: dropped, and created again as in version 1.
DROP VIEW uko_edge_list;

ALTER TABLE decisions
    ALTER COLUMN decision_id             TYPE TEXT COLLATE "C",
    ALTER COLUMN plan_id                 TYPE TEXT COLLATE "C",
    ALTER COLUMN parent_decision_id      TYPE TEXT COLLATE "C",
    ALTER COLUMN decision_type           TYPE TEXT COLLATE "C",
    ALTER COLUMN chosen_option           TYPE TEXT COLLATE "C",
    ALTER COLUMN rationale               TYPE TEXT COLLATE "C",
    ALTER COLUMN alternatives            TYPE TEXT COLLATE "C",
    ALTER COLUMN context_snapshot        TYPE TEXT COLLATE "C",
    ALTER COLUMN artifacts_produced      TYPE TEXT COLLATE "C",
    ALTER COLUMN corrects_decision_id    TYPE TEXT COLLATE "C",
    ALTER COLUMN downstream_decision_ids TYPE TEXT COLLATE "C",
    ALTER COLUMN downstream_plan_ids     TYPE TEXT COLLATE "C",
    ALTER COLUMN metadata                TYPE TEXT COLLATE "C",
    ALTER COLUMN content_hash            TYPE TEXT COLLATE "C",
    ALTER COLUMN chain_hash              TYPE TEXT COLLATE "C";

ALTER TABLE supersessions
    ALTER COLUMN decision_id   TYPE TEXT COLLATE "C",
    ALTER COLUMN superseded_by TYPE TEXT COLLATE "C",
    ALTER COLUMN plan_id       TYPE TEXT COLLATE "C",
    ALTER COLUMN content_hash  TYPE TEXT COLLATE "C",
    ALTER COLUMN chain_hash    TYPE TEXT COLLATE "C";

ALTER TABLE plans
    ALTER COLUMN plan_id           TYPE TEXT COLLATE "C",
    ALTER COLUMN first_decision_id TYPE TEXT COLLATE "C",
    ALTER COLUMN last_decision_id  TYPE TEXT COLLATE "C",
    ALTER COLUMN head_hash         TYPE TEXT COLLATE "C";

ALTER TABLE decision_type_counts
    ALTER COLUMN decision_type TYPE TEXT COLLATE "C";

ALTER TABLE uko_nodes
    ALTER COLUMN uri          TYPE TEXT COLLATE "C",
    ALTER COLUMN domain       TYPE TEXT COLLATE "C",
    ALTER COLUMN kind         TYPE TEXT COLLATE "C",
    ALTER COLUMN label        TYPE TEXT COLLATE "C",
    ALTER COLUMN version      TYPE TEXT COLLATE "C",
    ALTER COLUMN resource_uri TYPE TEXT COLLATE "C";

ALTER TABLE uko_node_views
    ALTER COLUMN content TYPE TEXT COLLATE "C";

ALTER TABLE uko_edges
    ALTER COLUMN relation TYPE TEXT COLLATE "C";

ALTER TABLE uko_code_references
    ALTER COLUMN resource_uri TYPE TEXT COLLATE "C",
    ALTER COLUMN from_uri     TYPE TEXT COLLATE "C",
    ALTER COLUMN relation     TYPE TEXT COLLATE "C",
    ALTER COLUMN name         TYPE TEXT COLLATE "C";

CREATE VIEW uko_edge_list AS
SELECT s.uri AS source, t.uri AS target, e.relation, e.weight
FROM uko_edges e
JOIN uko_nodes s ON s.node_id = e.source_id
JOIN uko_nodes t ON t.node_id = e.target_id;

INSERT INTO store_log (id, entries)
SELECT 1, coalesce(greatest((SELECT max(log_index) FROM decisions), (SELECT max(log_index) FROM supersessions)), 0)
ON CONFLICT DO NOTHING;
