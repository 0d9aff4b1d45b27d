-- decision-store schema, version 10: the words of each ingested file, and
-- what `ingest` has read of the tree's git history.
--
-- The lexical index: each ingested file's terms (its identifiers split at
-- camelCase and snake_case, in lower case: src/ingest/lexical.rs) with
-- how often each occurs, and the file's length in terms and the version
-- (content hash) they were read from. The projection ranks files by BM25
-- between the focus's terms and theirs. `ingest` replaces a file's rows
-- when its version changes and removes them when it goes.
CREATE TABLE code_term_docs (
    resource_uri TEXT PRIMARY KEY,
    version      TEXT NOT NULL,
    terms        INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE code_terms (
    term         TEXT NOT NULL,
    resource_uri TEXT NOT NULL,
    tf           INTEGER NOT NULL,
    PRIMARY KEY (term, resource_uri)
) WITHOUT ROWID;
CREATE INDEX code_terms_by_file ON code_terms (resource_uri);

-- The history read so far: files that changed together are linked by
-- `co_changed` edges (uko_edges) between their project:// nodes, weighted
-- by recency (src/ingest/history.rs). `head` is the last commit read,
-- `clock` the number of commits read, `base` the clock at which a commit
-- weighs 1 (moved forward, with every weight scaled down, before weights
-- grow too large for a float).
CREATE TABLE code_history (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    head  TEXT NOT NULL,
    clock INTEGER NOT NULL,
    base  INTEGER NOT NULL
);
