//! `gatehouse migrate --plan`: what each migration not yet applied would lock, and on how much,
//! before any of it runs (docs/deploying.md, "Upgrading"). The migrations are rehearsed on a
//! scratch database the caller made, migrated as far as the live one: each runs there as
//! [`crate::apply_up_to`] would run it (what it adds ahead, then its transaction), and
//! PostgreSQL says, before the transaction commits, which of the tables that were there before
//! it locked and in what mode, which it rewrote, scanned or indexed. The live database is only
//! read: its tables' sizes say how long a step that holds such a lock may take there.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::time::{Duration, Instant};

use crate::{ContractSteps, MigrationError, online};

/// The plan of an upgrade: the migrations `apply_up_to` would apply, in order, and the contract
/// steps (with what follows them) it would leave for `--contract`.
#[derive(Debug)]
pub struct Plan {
    pub migrations: Vec<PlannedMigration>,
    pub waiting: Vec<String>,
}

/// One migration, as rehearsed.
#[derive(Debug)]
pub struct PlannedMigration {
    /// `V18__tenant_rows`.
    pub name: String,
    /// Columns added ahead, each under a moment's lock: the tables.
    pub columns_ahead: Vec<TableSize>,
    /// Indexes built concurrently ahead, and the tables they are built on.
    pub indexes_ahead: Vec<(String, TableSize)>,
    /// The tables its transaction locks, each in the strongest mode it took, held to its commit.
    pub locks: Vec<TableLock>,
    /// How long the rehearsal's transaction took, on tables with nothing in them.
    pub rehearsed_in: Duration,
}

/// A table of the live database, with its size there.
#[derive(Debug, Clone)]
pub struct TableSize {
    pub table: String,
    /// PostgreSQL's estimate (the planner's statistics), partitions included.
    pub rows: f64,
    pub bytes: i64,
}

/// A lock the transaction holds on a table, and the work it does on it under that lock.
#[derive(Debug)]
pub struct TableLock {
    pub table: TableSize,
    /// PostgreSQL's name of the mode, as `pg_locks` has it (`AccessExclusiveLock`).
    pub mode: String,
    pub rewritten: bool,
    pub scanned: bool,
    /// Indexes the transaction builds on it.
    pub indexes_built: Vec<String>,
}

impl TableLock {
    /// Who waits while it is held: the running release's reads and writes, its writes, or none
    /// of its requests (only other schema changes).
    pub fn holds_up(&self) -> &'static str {
        match self.mode.as_str() {
            "AccessExclusiveLock" => "reads and writes wait",
            "ExclusiveLock" | "ShareRowExclusiveLock" | "ShareLock" => "writes wait",
            _ => "no request waits",
        }
    }

    /// Whether how long it is held grows with the table: the transaction rewrites, scans or
    /// indexes it. Otherwise it changes the catalogue only, a moment.
    pub fn grows_with_the_table(&self) -> bool {
        self.rewritten || self.scanned || !self.indexes_built.is_empty()
    }
}

/// Rehearses on `scratch` (an empty database the caller made and will drop) what
/// `apply_up_to(live, version, contract)` would do to `live`, which is only read.
pub async fn plan(
    live: &mut tokio_postgres::Client,
    scratch: &mut tokio_postgres::Client,
    version: Option<i32>,
    contract: ContractSteps,
) -> Result<Plan, MigrationError> {
    let runner = crate::embedded::migrations::runner();
    let pending = crate::pending(live, runner.get_migrations(), version, contract).await?;
    let sizes = table_sizes(live).await.map_err(MigrationError::History)?;
    let size =
        |table: &str| sizes.get(table).cloned().unwrap_or(TableSize { table: table.to_owned(), rows: 0.0, bytes: 0 });

    let applied = pending.last_applied.map(|v| i32::try_from(v).unwrap_or(i32::MAX));
    if applied.is_some() {
        crate::apply_up_to(scratch, applied, ContractSteps::Apply).await?;
    }
    let mut migrations = Vec::new();
    for migration in &pending.to_apply {
        let sql = migration.sql().unwrap_or_default();
        let columns_ahead = online::column_adds(sql).into_iter().map(|add| size(add.table)).collect();
        online::add_ahead(scratch, sql).await?;
        let mut indexes_ahead = Vec::new();
        for build in online::index_builds(sql) {
            let table = index_table(scratch, &build.name).await.map_err(MigrationError::History)?;
            indexes_ahead.push((build.name, size(&table.unwrap_or_default())));
        }
        let (found, rehearsed_in) = rehearse(scratch, sql)
            .await
            .map_err(|source| MigrationError::Rehearsal { name: migration.to_string(), source })?;
        let locks = found
            .into_iter()
            .map(|(table, found)| TableLock {
                table: size(&table),
                mode: found.mode,
                rewritten: found.rewritten,
                scanned: found.scanned,
                indexes_built: found.indexes_built,
            })
            .collect();
        migrations.push(PlannedMigration {
            name: migration.to_string(),
            columns_ahead,
            indexes_ahead,
            locks,
            rehearsed_in,
        });
    }
    Ok(Plan { migrations, waiting: pending.waiting.iter().map(|m| m.to_string()).collect() })
}

/// What the rehearsal found on one table that was there before the migration.
#[derive(Default)]
struct Found {
    mode: String,
    rewritten: bool,
    scanned: bool,
    indexes_built: Vec<String>,
}

/// PostgreSQL's table lock modes, weakest first.
const MODES: [&str; 8] = [
    "AccessShareLock",
    "RowShareLock",
    "RowExclusiveLock",
    "ShareUpdateExclusiveLock",
    "ShareLock",
    "ShareRowExclusiveLock",
    "ExclusiveLock",
    "AccessExclusiveLock",
];

/// Runs `sql` in a transaction on the scratch database and, before it commits, reads what it
/// did to the tables that were there before it.
async fn rehearse(
    scratch: &mut tokio_postgres::Client,
    sql: &str,
) -> Result<(BTreeMap<String, Found>, Duration), tokio_postgres::Error> {
    const TABLES: &str = "SELECT c.oid, c.relname, c.relfilenode FROM pg_class c
                           WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')";
    const SCANS: &str = "SELECT c.oid, pg_stat_get_xact_numscans(c.oid) FROM pg_class c
                          WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'";
    let transaction = scratch.transaction().await?;
    let before: HashMap<u32, (String, u32)> = transaction
        .query(TABLES, &[])
        .await?
        .iter()
        .map(|row| (row.get::<_, u32>(0), (row.get(1), row.get(2))))
        .collect();
    // The session's counts include earlier transactions' not yet reported: the difference is
    // the migration's.
    let scans_before: HashMap<u32, i64> =
        transaction.query(SCANS, &[]).await?.iter().map(|row| (row.get(0), row.get(1))).collect();
    let indexes_before: HashSet<u32> =
        transaction.query("SELECT indexrelid FROM pg_index", &[]).await?.iter().map(|row| row.get(0)).collect();
    let started = Instant::now();
    transaction.batch_execute(sql).await?;
    let took = started.elapsed();

    let mut found: BTreeMap<String, Found> = BTreeMap::new();
    let locks = transaction
        .query(
            "SELECT l.relation, l.mode FROM pg_locks l
              WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation' AND l.granted",
            &[],
        )
        .await?;
    for row in &locks {
        let (oid, mode): (u32, String) = (row.get(0), row.get(1));
        let Some((table, _)) = before.get(&oid) else { continue };
        let entry = found.entry(table.clone()).or_default();
        let rank = |m: &str| MODES.iter().position(|known| *known == m);
        if rank(&mode) > rank(&entry.mode) {
            entry.mode = mode;
        }
    }
    for row in transaction.query(TABLES, &[]).await? {
        let (oid, file): (u32, u32) = (row.get(0), row.get(2));
        // A partitioned table has no file of its own (0).
        if let Some((table, before_file)) = before.get(&oid)
            && *before_file != 0
            && *before_file != file
        {
            found.entry(table.clone()).or_default().rewritten = true;
        }
    }
    for row in transaction.query(SCANS, &[]).await? {
        let (oid, scans): (u32, i64) = (row.get(0), row.get(1));
        if let Some((table, _)) = before.get(&oid)
            && scans > scans_before.get(&oid).copied().unwrap_or(0)
        {
            found.entry(table.clone()).or_default().scanned = true;
        }
    }
    let built = transaction
        .query(
            "SELECT x.indexrelid, i.relname, x.indrelid FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid",
            &[],
        )
        .await?;
    for row in &built {
        let (index, name, table): (u32, String, u32) = (row.get(0), row.get(1), row.get(2));
        if let (false, Some((table, _))) = (indexes_before.contains(&index), before.get(&table)) {
            found.entry(table.clone()).or_default().indexes_built.push(name);
        }
    }
    transaction.commit().await?;
    // A table the rehearsal only read, or whose lock it never took, holds nobody up.
    found.retain(|_, f| !f.mode.is_empty());
    Ok((found, took))
}

/// The table an index of the scratch database is on.
async fn index_table(scratch: &tokio_postgres::Client, index: &str) -> Result<Option<String>, tokio_postgres::Error> {
    let row = scratch
        .query_opt(
            "SELECT t.relname FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid
              WHERE x.indexrelid = to_regclass($1)",
            &[&index],
        )
        .await?;
    Ok(row.map(|row| row.get(0)))
}

/// Every table of the live database with its estimated rows and its size, indexes included;
/// a partitioned table's are its partitions'.
async fn table_sizes(live: &tokio_postgres::Client) -> Result<HashMap<String, TableSize>, tokio_postgres::Error> {
    let rows = live
        .query(
            "SELECT c.relname,
                    CASE c.relkind WHEN 'p' THEN
                        (SELECT coalesce(sum(greatest(l.reltuples, 0)), 0)
                           FROM pg_partition_tree(c.oid) t JOIN pg_class l ON l.oid = t.relid WHERE t.isleaf)
                    ELSE greatest(c.reltuples, 0) END::float8,
                    CASE c.relkind WHEN 'p' THEN
                        (SELECT coalesce(sum(pg_total_relation_size(t.relid)), 0)
                           FROM pg_partition_tree(c.oid) t WHERE t.isleaf)
                    ELSE pg_total_relation_size(c.oid) END::int8
               FROM pg_class c
              WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')",
            &[],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|row| {
            let table: String = row.get(0);
            (table.clone(), TableSize { table, rows: row.get(1), bytes: row.get(2) })
        })
        .collect())
}

impl fmt::Display for TableSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:.0} rows, {:.1} MB)", self.table, self.rows, self.bytes as f64 / 1_048_576.0)
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.migrations.is_empty() && self.waiting.is_empty() {
            return writeln!(f, "nothing to apply");
        }
        for migration in &self.migrations {
            writeln!(f, "{}", migration.name)?;
            for table in &migration.columns_ahead {
                writeln!(f, "  ahead: a column added to {table}, a moment's lock, giving way to requests")?;
            }
            for (index, table) in &migration.indexes_ahead {
                writeln!(f, "  ahead: index {index} built concurrently on {table}, no request waits")?;
            }
            let rehearsed = migration.rehearsed_in.as_secs_f64() * 1000.0;
            writeln!(f, "  then one transaction ({rehearsed:.0} ms on empty tables), holding to its commit:")?;
            if migration.locks.is_empty() {
                writeln!(f, "    no lock on an existing table")?;
            }
            for lock in &migration.locks {
                let work = if lock.grows_with_the_table() {
                    let mut what = Vec::new();
                    if lock.rewritten {
                        what.push("rewrites it".to_owned());
                    }
                    if lock.scanned {
                        what.push("scans it".to_owned());
                    }
                    if !lock.indexes_built.is_empty() {
                        what.push(format!("builds {}", lock.indexes_built.join(", ")));
                    }
                    format!("{}: time grows with the table", what.join(", "))
                } else {
                    "the catalogue only: a moment".to_owned()
                };
                writeln!(f, "    {} on {}: {}; {work}", lock.mode, lock.table, lock.holds_up())?;
            }
        }
        if !self.waiting.is_empty() {
            writeln!(f, "left for `gatehouse migrate --contract`: {}", self.waiting.join(", "))?;
        }
        Ok(())
    }
}
