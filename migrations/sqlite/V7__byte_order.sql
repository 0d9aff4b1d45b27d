-- decision-store schema, version 7: nothing to do in SQLite.
--
-- migrations/postgres/V7__byte_order.sql makes every PostgreSQL text column
-- compare as bytes (COLLATE "C"), as SQLite's BINARY does already, and
-- inserts the store_log row that SQLite's version 2 inserted and
-- PostgreSQL's did not. The version exists so that both dialects count the
-- same.
SELECT 1;
