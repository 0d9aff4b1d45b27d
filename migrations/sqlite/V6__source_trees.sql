-- decision-store schema, version 6: source trees in the graph (`dstore ingest`).
--
-- `resource_uri` is the file a node comes from (`project://src/app.py`);
-- projection fragments carry it, and re-ingest finds a file's nodes by it.
-- NULL for nodes that came from nodes.jsonl without one.
ALTER TABLE uko_nodes ADD COLUMN resource_uri TEXT;
CREATE INDEX uko_nodes_by_resource ON uko_nodes (resource_uri) WHERE resource_uri IS NOT NULL;

-- What the code of each ingested file refers to, by name as written
-- (a module path, a called function, a base class). Every ingest resolves
-- all of them against the nodes present, so an edit in one file can link
-- (or unlink) a reference made in another without parsing that one again.
CREATE TABLE uko_code_references (
    resource_uri TEXT NOT NULL,
    from_uri     TEXT NOT NULL,
    relation     TEXT NOT NULL,
    name         TEXT NOT NULL,
    PRIMARY KEY (resource_uri, from_uri, relation, name)
) WITHOUT ROWID;
