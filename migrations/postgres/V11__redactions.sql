-- decision-store schema for PostgreSQL, version 11: redaction, an entry of
-- the log. As migrations/sqlite/V11__redactions.sql; the rule for updating
-- a decision is a trigger function here.
CREATE TABLE redactions (
    plan_id      TEXT COLLATE "C" NOT NULL,
    decision_id  TEXT COLLATE "C" NOT NULL REFERENCES decisions (decision_id),
    fields       TEXT COLLATE "C" NOT NULL,
    reason       TEXT COLLATE "C" NOT NULL,
    actor        TEXT COLLATE "C" NOT NULL,
    redacted_at  TEXT COLLATE "C" NOT NULL,
    before_hash  TEXT COLLATE "C" NOT NULL,
    after_hash   TEXT COLLATE "C" NOT NULL,
    content_hash TEXT COLLATE "C" NOT NULL,
    chain_index  BIGINT NOT NULL,
    chain_hash   TEXT COLLATE "C" NOT NULL,
    log_index    BIGINT NOT NULL UNIQUE,
    PRIMARY KEY (plan_id, chain_index)
);
CREATE INDEX redactions_by_decision ON redactions (decision_id);
CREATE TRIGGER redactions_no_update BEFORE UPDATE ON redactions
    FOR EACH ROW EXECUTE FUNCTION dstore_append_only();
CREATE TRIGGER redactions_no_delete BEFORE DELETE ON redactions
    FOR EACH ROW EXECUTE FUNCTION dstore_append_only();
CREATE TRIGGER redactions_no_truncate BEFORE TRUNCATE ON redactions
    FOR EACH STATEMENT EXECUTE FUNCTION dstore_append_only();

-- A decision is updated once per redaction of it, in the redaction's own
-- transaction, and only in the columns a redaction may empty.
CREATE FUNCTION dstore_decision_redacted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (
            SELECT 1 FROM redactions r
            WHERE r.decision_id = OLD.decision_id AND r.log_index = (SELECT entries FROM store_log WHERE id = 1) + 1)
        OR (NEW.decision_id, NEW.plan_id, NEW.parent_decision_id, NEW.sequence, NEW.decision_type,
            NEW.confidence_score, NEW.context_snapshot, NEW.corrects_decision_id, NEW.downstream_decision_ids,
            NEW.downstream_plan_ids, NEW.depth, NEW.content_hash, NEW.chain_index, NEW.chain_hash, NEW.log_index)
           IS DISTINCT FROM
           (OLD.decision_id, OLD.plan_id, OLD.parent_decision_id, OLD.sequence, OLD.decision_type,
            OLD.confidence_score, OLD.context_snapshot, OLD.corrects_decision_id, OLD.downstream_decision_ids,
            OLD.downstream_plan_ids, OLD.depth, OLD.content_hash, OLD.chain_index, OLD.chain_hash, OLD.log_index)
    THEN
        RAISE EXCEPTION 'append-only: decisions cannot be updated' USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END
$$;
DROP TRIGGER decisions_no_update ON decisions;
CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions
    FOR EACH ROW EXECUTE FUNCTION dstore_decision_redacted();
