-- The calls list (GET /voice-tools/calls) reads every session's calls newest first, the id
-- breaking ties, a page at a time: this index is in that exact order, so a page reads only its
-- own rows however many calls the table holds. (A session filter uses
-- tool_calls_session_created_idx.)
CREATE INDEX tool_calls_created_idx ON tool_calls (created_at DESC, tool_call_id DESC);
