-- decision-store schema for PostgreSQL, version 6: source trees in the
-- graph, as in migrations/sqlite/V6__source_trees.sql.
ALTER TABLE uko_nodes ADD COLUMN resource_uri TEXT;
CREATE INDEX uko_nodes_by_resource ON uko_nodes (resource_uri) WHERE resource_uri IS NOT NULL;

CREATE TABLE uko_code_references (
    resource_uri TEXT NOT NULL,
    from_uri     TEXT NOT NULL,
    relation     TEXT NOT NULL,
    name         TEXT NOT NULL,
    PRIMARY KEY (resource_uri, from_uri, relation, name)
);
