//! What a migration adds, added first without stopping the running release (docs/deploying.md,
//! "Upgrading"). Before a migration runs, each column it adds with `ALTER TABLE t ADD COLUMN IF
//! NOT EXISTS` (a statement on one line) is added on its own, a catalogue change under a lock
//! held for a moment; then each index it creates with `CREATE [UNIQUE] INDEX IF NOT EXISTS` is
//! built with `CONCURRENTLY`, outside any transaction, so the API's reads and writes go on
//! while it builds. The migration then finds them in place. An index on a table the same
//! migration creates cannot be built ahead; the migration builds it, as before.
//!
//! A statement that needs a lock the running release's requests would queue behind waits for it
//! at most [`LOCK_WAIT`], then gives way and tries again: a long read holding the table makes
//! the migration wait, never the requests.

use std::time::Duration;

use crate::MigrationError;

/// How long a migration's statement waits for a table's lock before it gives way.
const LOCK_WAIT: &str = "500ms";
/// How many times it tries before the migration fails (with the running release unharmed).
const LOCK_TRIES: u32 = 40;
/// The pause after giving way, in which the requests queued behind the statement go through.
const GIVE_WAY_PAUSE: Duration = Duration::from_millis(250);

/// SQLSTATEs of an index that cannot be built before its migration: a column or a table the
/// migration itself adds.
const NOT_YET_THERE: [&str; 2] = ["42703", "42P01"];

/// One `CREATE [UNIQUE] INDEX IF NOT EXISTS` statement of a migration.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct IndexBuild {
    pub(crate) name: String,
    /// The statement with `CONCURRENTLY`, without its semicolon.
    pub(crate) concurrently: String,
}

/// The index builds of `sql` that may run ahead of it: statements that start a line with
/// `CREATE INDEX IF NOT EXISTS` or `CREATE UNIQUE INDEX IF NOT EXISTS` and end at the first line
/// ending with a semicolon.
pub(crate) fn index_builds(sql: &str) -> Vec<IndexBuild> {
    let mut builds = Vec::new();
    let mut lines = sql.lines();
    while let Some(line) = lines.next() {
        let unique = if line.starts_with("CREATE INDEX IF NOT EXISTS ") {
            false
        } else if line.starts_with("CREATE UNIQUE INDEX IF NOT EXISTS ") {
            true
        } else {
            continue;
        };
        let mut statement = line.to_owned();
        while !statement.trim_end().ends_with(';') {
            match lines.next() {
                Some(next) => {
                    statement.push('\n');
                    statement.push_str(next);
                }
                None => break,
            }
        }
        let Some(body) = statement.trim_end().strip_suffix(';') else { continue };
        let prefix = if unique { "CREATE UNIQUE INDEX IF NOT EXISTS " } else { "CREATE INDEX IF NOT EXISTS " };
        let rest = &body[prefix.len()..];
        let Some(name) = rest.split_whitespace().next() else { continue };
        let kind = if unique {
            "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS "
        } else {
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS "
        };
        builds.push(IndexBuild { name: name.to_owned(), concurrently: format!("{kind}{rest}") });
    }
    builds
}

/// One `ALTER TABLE t ADD COLUMN IF NOT EXISTS ...;` statement of a migration, on one line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ColumnAdd<'a> {
    pub(crate) table: &'a str,
    pub(crate) statement: &'a str,
}

/// The column adds of `sql` that may run ahead of it: one statement alone on its line.
pub(crate) fn column_adds(sql: &str) -> Vec<ColumnAdd<'_>> {
    sql.lines()
        .map(str::trim_end)
        .filter(|line| line.ends_with(';') && line.matches(';').count() == 1)
        .filter_map(|statement| {
            let (table, _) = statement.strip_prefix("ALTER TABLE ")?.split_once(" ADD COLUMN IF NOT EXISTS ")?;
            Some(ColumnAdd { table: table.trim(), statement })
        })
        .collect()
}

/// The memory a migration gives its index builds (`SET LOCAL maintenance_work_mem = '1GB';`),
/// which its builds ahead are given too.
fn build_memory(sql: &str) -> Option<&str> {
    sql.lines().find_map(|line| line.strip_prefix("SET LOCAL maintenance_work_mem = ")?.strip_suffix(';'))
}

/// Adds the columns of `sql` and builds its indexes, ahead of the migration.
pub(crate) async fn add_ahead(client: &mut tokio_postgres::Client, sql: &str) -> Result<(), MigrationError> {
    for add in column_adds(sql) {
        giving_way(client, async |client: &mut tokio_postgres::Client| client.batch_execute(add.statement).await)
            .await
            .map_err(MigrationError::Lock)?
            .map_err(|source| MigrationError::ColumnAhead { table: add.table.to_owned(), source })?;
    }
    let builds = index_builds(sql);
    if builds.is_empty() {
        return Ok(());
    }
    if let Some(memory) = build_memory(sql) {
        client.batch_execute(&format!("SET maintenance_work_mem = {memory}")).await.map_err(MigrationError::Lock)?;
    }
    let built = build_ahead(client, builds).await;
    client.batch_execute("RESET maintenance_work_mem").await.map_err(MigrationError::Lock)?;
    built
}

/// Runs `statement` so that it gives way after [`LOCK_WAIT`] for a lock, and again after a pause
/// each time it did, up to [`LOCK_TRIES`] times; answers its last outcome. Only around such
/// statements: a concurrent index build waits for older transactions, which blocks nobody, and
/// must not give way.
pub(crate) async fn giving_way<T, E>(
    client: &mut tokio_postgres::Client,
    mut statement: impl AsyncFnMut(&mut tokio_postgres::Client) -> Result<T, E>,
) -> Result<Result<T, E>, tokio_postgres::Error>
where
    E: std::error::Error + 'static,
{
    let mut tries = 1;
    loop {
        client.batch_execute(&format!("SET lock_timeout = '{LOCK_WAIT}'")).await?;
        let outcome = statement(client).await;
        client.batch_execute("RESET lock_timeout").await?;
        match outcome {
            Err(e) if tries < LOCK_TRIES && lock_timed_out(&e) => {
                tries += 1;
                tokio::time::sleep(GIVE_WAY_PAUSE).await;
            }
            outcome => return Ok(outcome),
        }
    }
}

/// Whether `error`, or what caused it, is PostgreSQL giving up on a lock.
fn lock_timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(database) = error.downcast_ref::<tokio_postgres::Error>()
            && database.code() == Some(&tokio_postgres::error::SqlState::LOCK_NOT_AVAILABLE)
        {
            return true;
        }
        current = error.source();
    }
    false
}

/// Builds each index concurrently. A build that failed before (PostgreSQL leaves an invalid
/// index behind) is dropped and made again.
async fn build_ahead(client: &tokio_postgres::Client, builds: Vec<IndexBuild>) -> Result<(), MigrationError> {
    for build in builds {
        drop_if_invalid(client, &build.name).await?;
        match client.batch_execute(&build.concurrently).await {
            Ok(()) => {}
            Err(e) if e.code().is_some_and(|code| NOT_YET_THERE.contains(&code.code())) => {}
            Err(e) => {
                drop_if_invalid(client, &build.name).await?;
                return Err(MigrationError::IndexAhead { index: build.name, source: e });
            }
        }
    }
    Ok(())
}

async fn drop_if_invalid(client: &tokio_postgres::Client, name: &str) -> Result<(), MigrationError> {
    let invalid = client
        .query_opt(
            "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
              WHERE c.relname = $1 AND pg_table_is_visible(c.oid) AND NOT i.indisvalid",
            &[&name],
        )
        .await
        .map_err(|source| MigrationError::IndexAhead { index: name.to_owned(), source })?;
    if invalid.is_some() {
        // The name comes from a migration of this crate, never from input.
        client
            .batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {name}"))
            .await
            .map_err(|source| MigrationError::IndexAhead { index: name.to_owned(), source })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builds_of_a_migration_are_its_if_not_exists_indexes_made_concurrent() {
        let sql = "-- a comment naming CREATE INDEX IF NOT EXISTS in passing\n\
                   ALTER TABLE t ADD COLUMN c int;\n\
                   CREATE INDEX IF NOT EXISTS t_c_idx\n    ON t (c DESC);\n\
                   CREATE UNIQUE INDEX IF NOT EXISTS t_u_idx ON t (a, b) WHERE a IS NOT NULL;\n\
                   CREATE INDEX t_plain_idx ON t (d);\n";
        assert_eq!(
            index_builds(sql),
            [
                IndexBuild {
                    name: "t_c_idx".into(),
                    concurrently: "CREATE INDEX CONCURRENTLY IF NOT EXISTS t_c_idx\n    ON t (c DESC)".into()
                },
                IndexBuild {
                    name: "t_u_idx".into(),
                    concurrently:
                        "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS t_u_idx ON t (a, b) WHERE a IS NOT NULL".into()
                },
            ]
        );
    }

    #[test]
    fn the_columns_added_ahead_are_the_one_line_if_not_exists_adds() {
        let sql = "ALTER TABLE t ADD COLUMN IF NOT EXISTS c text NOT NULL DEFAULT 'x';\n\
                   ALTER TABLE t ADD COLUMN d int;\n\
                   ALTER TABLE t ADD COLUMN IF NOT EXISTS e int,\n    ADD COLUMN IF NOT EXISTS f int;\n\
                   ALTER TABLE t ADD COLUMN IF NOT EXISTS g int; DROP TABLE u;\n\
                   SET LOCAL maintenance_work_mem = '1GB';\n";
        assert_eq!(
            column_adds(sql),
            [ColumnAdd {
                table: "t",
                statement: "ALTER TABLE t ADD COLUMN IF NOT EXISTS c text NOT NULL DEFAULT 'x';"
            }]
        );
        assert_eq!(build_memory(sql), Some("'1GB'"));
    }

    #[test]
    fn every_shipped_index_build_is_a_plain_name() {
        for migration in crate::embedded::migrations::runner().get_migrations() {
            for build in index_builds(migration.sql().unwrap_or_default()) {
                assert!(
                    build.name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
                    "{}: {}",
                    migration.name(),
                    build.name
                );
            }
        }
    }
}
