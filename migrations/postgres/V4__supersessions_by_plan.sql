-- decision-store schema for PostgreSQL, version 4: a plan's supersession
-- links by index, as in migrations/sqlite/V4__supersessions_by_plan.sql.
CREATE INDEX supersessions_by_plan ON supersessions (plan_id);
