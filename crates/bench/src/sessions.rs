//! The two sessions the context scenarios read, seeded before an in-process run.
use anyhow::{Context, Result};

/// The session `context` reads.
pub(crate) const BENCH_SESSION: &str = "bench-session";
const SMALL_SESSION_OPEN_CALLS: i64 = 25;
const SMALL_SESSION_SETTLED_CALLS: i64 = 20;
/// The session `context-large` reads: as a relay that looped would leave it.
pub(crate) const BENCH_LARGE_SESSION: &str = "bench-session-large";
const LARGE_SESSION_OPEN_CALLS: i64 = 6_000;
const LARGE_SESSION_SETTLED_CALLS: i64 = 2_000;

/// The two sessions the context scenarios read. Both answers are full (20 open and 10 settled
/// calls listed), so the scenarios differ only in how many calls the session holds.
pub(crate) async fn seed_context(database_url: &str) -> Result<()> {
    let (client, _driver) =
        gatehouse_pg_connect::connect(database_url).await.context("connecting to seed the benchmark sessions")?;
    let sessions = [
        (BENCH_SESSION, "a", SMALL_SESSION_OPEN_CALLS, SMALL_SESSION_SETTLED_CALLS),
        (BENCH_LARGE_SESSION, "b", LARGE_SESSION_OPEN_CALLS, LARGE_SESSION_SETTLED_CALLS),
    ];
    for (session, id_prefix, open, settled) in sessions {
        client.execute("DELETE FROM tool_calls WHERE session_id = $1", &[&session]).await?;
        // The newest `open` calls are PENDING, the older ones COMPLETED; ids are `tc_` + the
        // prefix + 11 hex digits, so the two sessions never share one.
        client
            .execute(
                "INSERT INTO tool_calls (tool_call_id, session_id, function_name, tool, parameters, status, expires_at, created_at)
                 SELECT 'tc_' || $2::text || lpad(to_hex(i), 11, '0'), $1, 'send_email', 'gmail',
                        jsonb_build_object('to', 'john.smith@gmail.com', 'subject', 'Report ' || i),
                        CASE WHEN i < $3::bigint THEN 'PENDING' ELSE 'COMPLETED' END,
                        now() + interval '1 hour', now() - make_interval(secs => i)
                   FROM generate_series(0, $3::bigint + $4::bigint - 1) AS i",
                &[&session, &id_prefix, &open, &settled],
            )
            .await?;
    }
    client.execute("ANALYZE tool_calls", &[]).await?;
    Ok(())
}
