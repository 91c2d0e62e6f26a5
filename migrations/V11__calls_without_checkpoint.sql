-- Whether the call's tool stops at a checkpoint (its description's `needs_checkpoint`, which
-- `validate` answers and the create records). The executor reads it to go straight from
-- EXECUTING to the irreversible step for a tool that has nothing to prepare, instead of
-- asking the tool to prepare over the contract only to hear "no checkpoint". Calls recorded
-- before this column existed keep the full walk.
ALTER TABLE tool_calls ADD COLUMN needs_checkpoint boolean NOT NULL DEFAULT true;
