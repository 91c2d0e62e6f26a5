-- The tool's own table, in its own schema (tool_{{project-name | snake_case}}): gatehouse migrate
-- applies this folder there, with its own numbering (docs/tools.md in the Gatehouse repository,
-- "A tool's own tables"). Add V2__..., V3__... as the tool grows; never edit a shipped one.
CREATE TABLE quotes (
    tool_call_id text        PRIMARY KEY,
    item         text        NOT NULL,
    quantity     bigint      NOT NULL,
    ordered      boolean     NOT NULL DEFAULT false,
    created_at   timestamptz NOT NULL DEFAULT now()
);
