-- decision-store schema, version 11: redaction, an entry of the log.
--
-- A redaction removes content from a decision (a secret, personal data)
-- and records who, why and when as an entry of its own in the plan's hash
-- chain. The decision row keeps its content hash (the chain committed to
-- it); the redaction keeps the row's content hash before and after it, so
-- `check` verifies the redacted row against `after_hash` and the chain
-- through the original hash: nothing of the log's evidence goes with the
-- content.
CREATE TABLE redactions (
    plan_id      TEXT NOT NULL,
    decision_id  TEXT NOT NULL REFERENCES decisions (decision_id),
    -- The fields redacted, comma-separated (rationale,chosen_option,...).
    fields       TEXT NOT NULL,
    reason       TEXT NOT NULL,
    actor        TEXT NOT NULL,
    -- RFC 3339.
    redacted_at  TEXT NOT NULL,
    -- The row's content hash before and after this redaction (hex).
    before_hash  TEXT NOT NULL,
    after_hash   TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    chain_index  INTEGER NOT NULL,
    chain_hash   TEXT NOT NULL,
    log_index    INTEGER NOT NULL UNIQUE,
    PRIMARY KEY (plan_id, chain_index)
) WITHOUT ROWID;
CREATE INDEX redactions_by_decision ON redactions (decision_id);
CREATE TRIGGER redactions_no_update BEFORE UPDATE ON redactions
BEGIN
    SELECT RAISE(ABORT, 'append-only: redactions cannot be updated');
END;
CREATE TRIGGER redactions_no_delete BEFORE DELETE ON redactions
BEGIN
    SELECT RAISE(ABORT, 'append-only: redactions cannot be deleted');
END;

-- A decision is updated once per redaction of it, in the redaction's own
-- transaction (the redaction is the entry that transaction appends to the
-- log), and only in the columns a redaction may empty. Anything else is
-- refused as before.
DROP TRIGGER decisions_no_update;
CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions
WHEN NOT EXISTS (
        SELECT 1 FROM redactions r
        WHERE r.decision_id = OLD.decision_id AND r.log_index = (SELECT entries FROM store_log WHERE id = 1) + 1)
    OR NEW.decision_id IS NOT OLD.decision_id OR NEW.plan_id IS NOT OLD.plan_id
    OR NEW.parent_decision_id IS NOT OLD.parent_decision_id OR NEW.sequence IS NOT OLD.sequence
    OR NEW.decision_type IS NOT OLD.decision_type OR NEW.confidence_score IS NOT OLD.confidence_score
    OR NEW.context_snapshot IS NOT OLD.context_snapshot OR NEW.corrects_decision_id IS NOT OLD.corrects_decision_id
    OR NEW.downstream_decision_ids IS NOT OLD.downstream_decision_ids
    OR NEW.downstream_plan_ids IS NOT OLD.downstream_plan_ids OR NEW.depth IS NOT OLD.depth
    OR NEW.content_hash IS NOT OLD.content_hash OR NEW.chain_index IS NOT OLD.chain_index
    OR NEW.chain_hash IS NOT OLD.chain_hash OR NEW.log_index IS NOT OLD.log_index
BEGIN
    SELECT RAISE(ABORT, 'append-only: decisions cannot be updated');
END;
