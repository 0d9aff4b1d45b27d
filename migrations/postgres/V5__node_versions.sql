-- decision-store schema for PostgreSQL, version 5: a version for every UKO
-- node, as in migrations/sqlite/V5__node_versions.sql.
ALTER TABLE uko_nodes ADD COLUMN version TEXT;
