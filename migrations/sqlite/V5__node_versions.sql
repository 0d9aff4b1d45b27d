-- decision-store schema, version 5: a version for every UKO node.
--
-- A decision's context snapshot records the version of each resource it
-- saw; `dstore stale` compares those with the graph's versions now. The
-- version comes from `ingest` (a content hash) or from `nodes.jsonl`; NULL
-- means none was given, and the store then derives one from the node's
-- views (docs/staleness.md), so rows written before this version need no
-- backfill and export returns exactly what was imported.
ALTER TABLE uko_nodes ADD COLUMN version TEXT;
