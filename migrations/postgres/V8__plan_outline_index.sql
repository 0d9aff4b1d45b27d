-- decision-store schema, version 8: nothing to do in PostgreSQL.
--
-- migrations/sqlite/V8__plan_outline_index.sql adds a covering index for a
-- plan's outline. PostgreSQL refuses index entries larger than about a
-- third of a page, and chosen_option has no length limit, so the same
-- index would refuse some valid decisions; the outline reads the table
-- through decisions' (plan_id, sequence) key instead. The version exists
-- so that both dialects count the same.
SELECT 1;
