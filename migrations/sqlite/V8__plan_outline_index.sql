-- decision-store schema, version 8: a plan's outline from one index.
--
-- A tree's outline (Store::decision_tree_outline, `dstore tree`) needs
-- eight short columns of each of a plan's rows. Read from the table, each
-- row costs a seek into a ~1 KiB record; this index holds those columns in
-- plan and sequence order, so the outline reads only its small entries
-- (about a tenth of the pages). chosen_option comes last: it is the one
-- column of unbounded length.
CREATE INDEX decisions_outline ON decisions (
    plan_id, sequence, decision_id, parent_decision_id, decision_type,
    confidence_score, corrects_decision_id, chosen_option
);
