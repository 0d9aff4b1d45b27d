-- decision-store schema, version 4: a plan's supersession links by index.
--
-- A plan's tree reads its decisions, then its supersession links in one
-- query by plan (a handful of rows) instead of a primary-key lookup in
-- `supersessions` for each of its decisions: 2 ms of a 5,000-decision
-- plan's 13 ms load. Links are few, so the index costs inserts nothing
-- that shows.
CREATE INDEX supersessions_by_plan ON supersessions (plan_id);
