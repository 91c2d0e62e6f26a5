//! Index builds that do not stop the running release: before a migration runs, each index it
//! creates with `CREATE [UNIQUE] INDEX IF NOT EXISTS` is built with `CONCURRENTLY`, outside any
//! transaction, so the API's writes go on while it builds; the migration then finds it in place
//! (docs/deploying.md, "Upgrading"). An index on a column or table the same migration adds
//! cannot be built ahead; the migration builds it under its own lock, as before.

use crate::MigrationError;

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

/// Builds each index of `sql` concurrently, ahead of its migration. A build that failed before
/// (PostgreSQL leaves an invalid index behind) is dropped and made again.
pub(crate) async fn build_ahead(client: &tokio_postgres::Client, sql: &str) -> Result<(), MigrationError> {
    for build in index_builds(sql) {
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
