-- decision-store schema, version 10: the words of each ingested file, and
-- what `ingest` has read of the tree's git history.
--
-- As migrations/sqlite/V10__words_and_history.sql. Text columns compare
-- byte by byte (COLLATE "C"), as in every table of the store.
CREATE TABLE code_term_docs (
    resource_uri TEXT COLLATE "C" PRIMARY KEY,
    version      TEXT COLLATE "C" NOT NULL,
    terms        BIGINT NOT NULL
);
CREATE TABLE code_terms (
    term         TEXT COLLATE "C" NOT NULL,
    resource_uri TEXT COLLATE "C" NOT NULL,
    tf           BIGINT NOT NULL,
    PRIMARY KEY (term, resource_uri)
);
CREATE INDEX code_terms_by_file ON code_terms (resource_uri);

CREATE TABLE code_history (
    id    BIGINT PRIMARY KEY CHECK (id = 1),
    head  TEXT COLLATE "C" NOT NULL,
    clock BIGINT NOT NULL,
    base  BIGINT NOT NULL
);
