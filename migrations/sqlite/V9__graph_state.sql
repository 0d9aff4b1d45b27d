-- decision-store schema, version 9: the graph's generation.
--
-- Every transaction that writes the graph (nodes, views, edges, code
-- references) adds one to `generation`. An ingest plans its changes from a
-- snapshot, outside any transaction, and applies them only while the
-- generation is still the one it planned from; `resolved` is the
-- generation at which an ingest last completed a plan, so the next one
-- knows whether the edges between ingested nodes may need resolving again
-- (a plan applied in several transactions that did not finish, or another
-- writer's change since). A store ingested before this version was
-- ingested in one transaction: it starts resolved.
CREATE TABLE graph_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL,
    resolved   INTEGER NOT NULL
);
INSERT INTO graph_state (id, generation, resolved) VALUES (1, 0, 0);
