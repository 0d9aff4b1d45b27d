-- decision-store schema, version 10: the words of each ingested file, and
-- what `ingest` has read of the tree's git history.
--
-- The lexical index: each ingested file's terms (its identifiers split at
-- camelCase and snake_case, in lower case: src/ingest/lexical.rs) with
-- how often each occurs, the file's length in terms, and the version
-- (content hash) they were read from. The projection ranks files by BM25
-- between the focus's terms and theirs. `ingest` replaces a file's rows
-- when its version changes and removes them when it goes.
CREATE TABLE code_term_docs (
    doc_id       INTEGER PRIMARY KEY,
    resource_uri TEXT NOT NULL UNIQUE,
    version      TEXT NOT NULL,
    -- The file's length in terms.
    terms        INTEGER NOT NULL
);
-- Each file's terms with their counts ("term:count" separated by spaces):
-- the query when the file is the focus, and what to remove when it changes.
-- Apart from the documents, whose rows BM25 reads for every posting.
CREATE TABLE code_term_vectors (
    doc_id INTEGER PRIMARY KEY REFERENCES code_term_docs (doc_id),
    vector TEXT NOT NULL
);
-- The postings: the files (by doc_id) holding each term, and how often.
CREATE TABLE code_terms (
    term   TEXT NOT NULL,
    doc_id INTEGER NOT NULL,
    tf     INTEGER NOT NULL,
    PRIMARY KEY (term, doc_id)
) WITHOUT ROWID;
-- How many files hold each term (its postings counted), kept as they change.
CREATE TABLE code_term_stats (
    term TEXT PRIMARY KEY,
    df   INTEGER NOT NULL
) WITHOUT ROWID;

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

-- The code references `ingest` keeps (what each file's definitions name,
-- resolved into edges at every ingest), one row per file instead of one
-- per reference: they are only ever read all at once and replaced a file
-- at a time, and a row per reference made them the largest write of an
-- ingest. A line a reference: from_uri, relation and name separated by
-- tabs (a backslash, tab or newline inside them escaped as \\, \t, \n).
CREATE TABLE uko_code_reference_lists (
    resource_uri TEXT PRIMARY KEY,
    refs         TEXT NOT NULL
) WITHOUT ROWID;
INSERT INTO uko_code_reference_lists (resource_uri, refs)
SELECT resource_uri, group_concat(line, char(10)) FROM (
    SELECT resource_uri,
           replace(replace(replace(from_uri, '\', '\\'), char(9), '\t'), char(10), '\n') || char(9) ||
           relation || char(9) ||
           replace(replace(replace(name, '\', '\\'), char(9), '\t'), char(10), '\n') AS line
    FROM uko_code_references ORDER BY resource_uri, from_uri, relation, name
) GROUP BY resource_uri;
DROP TABLE uko_code_references;
