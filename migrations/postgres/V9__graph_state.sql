-- decision-store schema, version 9: the graph's generation.
--
-- As migrations/sqlite/V9__graph_state.sql. On PostgreSQL the row is also
-- the graph writers' lock (SELECT ... FOR UPDATE), apart from store_log's,
-- which only writers of the decision log take: an ingest never makes a
-- decision's insert wait.
CREATE TABLE graph_state (
    id         BIGINT PRIMARY KEY CHECK (id = 1),
    generation BIGINT NOT NULL,
    resolved   BIGINT NOT NULL
);
INSERT INTO graph_state (id, generation, resolved) VALUES (1, 0, 0);
