-- One call as the executor reads it before driving it: the call as routes report it, and
-- whether its tool stops at a checkpoint (V11). $1 id; NULL when no call has this id.
SELECT (SELECT jsonb_build_object('call', tool_call_json(c), 'needs_checkpoint', c.needs_checkpoint)
          FROM tool_calls c WHERE c.tool_call_id = $1) AS call
