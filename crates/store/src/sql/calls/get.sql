-- One call, as routes report it. $1 id.
SELECT tool_call_json(c) FROM tool_calls c WHERE c.tool_call_id = $1
