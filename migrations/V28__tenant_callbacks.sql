-- Each tenant's callbacks (docs/keys.md, "Each tenant's callbacks"; docs/architecture.md,
-- "Callbacks"): the hosts they may reach, and the generation of the secret that signs them. The
-- secret itself is derived from the `callback_secret` variable and never stored. The first
-- tenant's hosts stay the deployment's `callback_allowed_hosts`; every other tenant names its
-- own (`gatehouse tenants callbacks ID --hosts ...`), and until it does its calls get none.
--
-- Catalogue-only on a populated database (ADD COLUMN with a constant default or none), so the
-- running release goes on serving while it applies; that release reads none of the columns.
ALTER TABLE tenants
    ADD COLUMN IF NOT EXISTS callback_allowed_hosts text
        CHECK (length(callback_allowed_hosts) <= 2000),
    ADD COLUMN IF NOT EXISTS callback_secret_generation integer NOT NULL DEFAULT 1
        CHECK (callback_secret_generation > 0),
    -- During a rotation, the generation before: callbacks are signed with both until it ends.
    ADD COLUMN IF NOT EXISTS callback_secret_previous_generation integer
        CHECK (callback_secret_previous_generation > 0);
