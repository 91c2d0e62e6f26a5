-- The bound V29 put on `outcome_told_by`, checked for the rows that were there before it: a
-- scan under a lock that lets reads and writes go on (docs/deploying.md, "Upgrading"). On a
-- database that applied V29 before it left the check for here, there is nothing to check.
ALTER TABLE tool_calls VALIDATE CONSTRAINT tool_calls_outcome_told_by_bounded;
