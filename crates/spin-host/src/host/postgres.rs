//! `spin:postgres/postgres@4.0.0` over pooled connections.
//!
//! A guest's `connection.open` borrows a connection from the pool for its address and its drop
//! returns it, so no request pays for a new connection. Statements are prepared once per pooled
//! connection and cached, so a query costs a single round trip; one that begins with
//! [`gatehouse_domain::sql::PLANNED_EACH_TIME`] is prepared each time, so PostgreSQL plans it
//! for its own values, as Spin's host does every statement.

// `Error` is the interface's own type, returned by value as the generated bindings require.
#![allow(clippy::result_large_err)]
use std::collections::HashMap;
use std::sync::Mutex;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod};
use gatehouse_domain::sql::planned_each_time;
use gatehouse_pg_connect::PgTarget;
use wasmtime::component::Resource;

use super::HostState;
use super::pg_values::{Param, RawCell, data_type, db_value};
use crate::bindings::spin::postgres4_0_0::postgres::{
    Column, DbError, DbValue, Error, Host, HostConnection, ParameterValue, QueryError, RowSet,
};

const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long a guest waits for a free pooled connection before `open` fails.
const POOL_WAIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What `query` does with a result that has zero rows.
///
/// Spin 4.0.x's PostgreSQL host never answers such a query (spinframework/spin issue 3671,
/// fixed on main by PR 3673, in no release yet): it waits for the column list that only a
/// first row brings. This host answers it correctly; `Refuse` makes it fail loudly instead, so
/// the tests prove the application never sends a statement that would hang under Spin 4.0.x.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZeroRows {
    /// Answer an empty row set, as PostgreSQL and a fixed Spin do.
    #[default]
    Allow,
    /// Answer a query error that names the statement.
    Refuse,
}

/// How much of the statement the refusal quotes.
const QUOTED_STATEMENT_CHARS: usize = 200;

impl ZeroRows {
    /// `Err` when the policy refuses a result of `rows` rows for `statement`.
    fn check(self, statement: &str, rows: usize) -> Result<(), Error> {
        match (self, rows) {
            (ZeroRows::Refuse, 0) => Err(Error::QueryFailed(QueryError::Text(format!(
                "zero-row result (this statement would hang Spin 4.0.x's PostgreSQL host, spin issue 3671): {}",
                gatehouse_domain::sql::statement_excerpt(statement, QUOTED_STATEMENT_CHARS)
            )))),
            _ => Ok(()),
        }
    }
}

/// One pool per database address, shared by every request of every component.
pub(crate) struct PgPools {
    max_size: usize,
    pools: Mutex<HashMap<String, AddressPool>>,
    zero_rows: ZeroRows,
}

/// A pool, and the address it connects to (for explaining a failure to connect).
#[derive(Clone)]
struct AddressPool {
    pool: Pool,
    target: std::sync::Arc<PgTarget>,
}

/// The resource behind a guest's `connection` handle.
#[allow(unreachable_pub)] // re-exported by the generated bindings with `pub use`
pub struct PgConnection {
    client: Object,
}

impl PgPools {
    /// Pools of up to `max_size` connections that answer zero-row queries ([`ZeroRows::Allow`]).
    #[cfg(test)]
    pub(crate) fn new(max_size: usize) -> PgPools {
        PgPools::with_zero_rows(max_size, ZeroRows::default())
    }

    /// Pools of up to `max_size` connections, with the given answer to zero-row queries.
    pub(crate) fn with_zero_rows(max_size: usize, zero_rows: ZeroRows) -> PgPools {
        PgPools { max_size, pools: Mutex::new(HashMap::new()), zero_rows }
    }

    fn pool(&self, address: &str) -> Result<AddressPool, Error> {
        let mut pools = self.pools.lock().map_err(|_| Error::Other("connection pool lock poisoned".into()))?;
        if let Some(pool) = pools.get(address) {
            return Ok(pool.clone());
        }
        // The address's sslmode and sslrootcert decide TLS, as for every other connection.
        let mut target = PgTarget::parse(address)
            .map_err(|e| Error::ConnectionFailed(format!("invalid address {}: {e}", redacted(address))))?;
        // A database that does not answer must become an error the component can report
        // (503), not a request that hangs.
        target.set_connect_timeout(CONNECT_TIMEOUT);
        let manager = Manager::from_config(
            target.config().clone(),
            target.tls(),
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(self.max_size)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| Error::ConnectionFailed(e.to_string()))?;
        let pool = AddressPool { pool, target: std::sync::Arc::new(target) };
        pools.insert(address.to_owned(), pool.clone());
        Ok(pool)
    }

    /// Connections in use and idle, over every address's pool.
    pub(crate) fn connections(&self) -> (i64, i64) {
        let Ok(pools) = self.pools.lock() else { return (0, 0) };
        pools.values().fold((0, 0), |(in_use, idle), pool| {
            let status = pool.pool.status();
            let size = i64::try_from(status.size).unwrap_or(i64::MAX);
            let available = i64::try_from(status.available).unwrap_or(0);
            (in_use + size - available, idle + available)
        })
    }

    /// Borrows a connection from the address's pool, creating the pool on first use.
    async fn get(&self, address: &str) -> Result<Object, Error> {
        let AddressPool { pool, target } = self.pool(address)?;
        pool.get().await.map_err(|e| match e {
            PoolError::Backend(e) => Error::ConnectionFailed(target.connect_error(e).full_message()),
            other => Error::ConnectionFailed(other.to_string()),
        })
    }
}

/// Describes an address without its credentials, for error messages.
fn redacted(address: &str) -> String {
    match url::Url::parse(address) {
        Ok(url) => format!("{}://{}:{}", url.scheme(), url.host_str().unwrap_or(""), url.port().unwrap_or(5432)),
        Err(_) => "the given address".into(),
    }
}

/// The statement prepared on `client`: from the connection's cache, or afresh when it asks to
/// be planned each time.
async fn prepare(client: &Object, statement: &str) -> Result<tokio_postgres::Statement, Error> {
    let prepared = if planned_each_time(statement) {
        client.prepare(statement).await
    } else {
        client.prepare_cached(statement).await
    };
    prepared.map_err(query_error)
}

fn query_error(e: tokio_postgres::Error) -> Error {
    if let Some(db) = e.as_db_error() {
        let mut extras = Vec::new();
        if let Some(hint) = db.hint() {
            extras.push(("hint".to_owned(), hint.to_owned()));
        }
        if let Some(constraint) = db.constraint() {
            extras.push(("constraint".to_owned(), constraint.to_owned()));
        }
        if let Some(table) = db.table() {
            extras.push(("table".to_owned(), table.to_owned()));
        }
        if let Some(column) = db.column() {
            extras.push(("column".to_owned(), column.to_owned()));
        }
        return Error::QueryFailed(QueryError::DbError(DbError {
            as_text: db.to_string(),
            severity: db.severity().to_owned(),
            code: db.code().code().to_owned(),
            message: db.message().to_owned(),
            detail: db.detail().map(str::to_owned),
            extras,
        }));
    }
    // The cause (say, which parameter could not be converted and why) is in the source chain.
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if e.is_closed() {
        return Error::ConnectionFailed(text);
    }
    Error::QueryFailed(QueryError::Text(text))
}

/// PostgreSQL's code for a failed statement, when it answered one.
fn sqlstate(error: &Error) -> Option<&str> {
    match error {
        Error::QueryFailed(QueryError::DbError(db)) => Some(&db.code),
        _ => None,
    }
}

impl HostState {
    fn connection(&self, handle: &Resource<PgConnection>) -> Result<&Object, Error> {
        self.table.get(handle).map(|c| &c.client).map_err(|e| Error::Other(format!("invalid connection handle: {e}")))
    }
}

fn params(values: Vec<ParameterValue>) -> Vec<Param> {
    values.into_iter().map(Param).collect()
}

fn as_sql(params: &[Param]) -> Vec<&(dyn postgres_types::ToSql + Sync)> {
    params.iter().map(|p| p as &(dyn postgres_types::ToSql + Sync)).collect()
}

/// Decodes one result row by its columns' PostgreSQL types.
fn row_values(row: &tokio_postgres::Row, columns: &[tokio_postgres::Column]) -> Result<Vec<DbValue>, Error> {
    columns
        .iter()
        .enumerate()
        .map(|(i, column)| {
            let conversion =
                |e: &dyn std::fmt::Display| Error::ValueConversionFailed(format!("column {}: {e}", column.name()));
            let raw: Option<RawCell> = row.try_get(i).map_err(|e| conversion(&e))?;
            db_value(column.type_(), raw.map(|r| r.0)).map_err(|e| conversion(&e))
        })
        .collect()
}

impl HostConnection for HostState {
    async fn open(&mut self, address: String) -> Result<Resource<PgConnection>, Error> {
        if !self.component.allowed_hosts.allows_url(&address) {
            return Err(Error::ConnectionFailed(format!(
                "{} is not in allowed_outbound_hosts of component '{}'",
                redacted(&address),
                self.component.id
            )));
        }
        let client = self.pg.get(&address).await?;
        self.table.push(PgConnection { client }).map_err(|e| Error::Other(format!("too many open connections: {e}")))
    }

    async fn query(
        &mut self,
        handle: Resource<PgConnection>,
        statement: String,
        values: Vec<ParameterValue>,
    ) -> Result<RowSet, Error> {
        let client = self.connection(&handle)?;
        let span = self.telemetry.statement(&statement);
        let rows = async {
            let prepared = prepare(client, &statement).await?;
            let params = params(values);
            let rows = client.query(&prepared, &as_sql(&params)).await.map_err(query_error)?;
            Ok((prepared, rows))
        }
        .await;
        let (prepared, rows) = match rows {
            Ok(answer) => answer,
            Err(e) => {
                span.failed(sqlstate(&e));
                return Err(e);
            }
        };
        span.succeeded(u64::try_from(rows.len()).unwrap_or(u64::MAX));
        self.pg.zero_rows.check(&statement, rows.len())?;
        let columns: Vec<Column> = prepared
            .columns()
            .iter()
            .map(|c| Column { name: c.name().to_owned(), data_type: data_type(c.type_()) })
            .collect();
        let rows = rows.iter().map(|row| row_values(row, prepared.columns())).collect::<Result<_, _>>()?;
        Ok(RowSet { columns, rows })
    }

    async fn execute(
        &mut self,
        handle: Resource<PgConnection>,
        statement: String,
        values: Vec<ParameterValue>,
    ) -> Result<u64, Error> {
        let client = self.connection(&handle)?;
        let span = self.telemetry.statement(&statement);
        let changed = async {
            let prepared = prepare(client, &statement).await?;
            let params = params(values);
            client.execute(&prepared, &as_sql(&params)).await.map_err(query_error)
        }
        .await;
        match &changed {
            Ok(rows) => span.succeeded(*rows),
            Err(e) => span.failed(sqlstate(e)),
        }
        changed
    }

    async fn drop(&mut self, handle: Resource<PgConnection>) -> anyhow::Result<()> {
        self.table.delete(handle)?;
        Ok(())
    }
}

impl Host for HostState {}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(result: Result<(), Error>) -> Option<String> {
        match result {
            Err(Error::QueryFailed(QueryError::Text(text))) => Some(text),
            _ => None,
        }
    }

    #[test]
    fn allow_answers_every_result() {
        assert_eq!(ZeroRows::default(), ZeroRows::Allow);
        for rows in [0, 1, 5] {
            assert!(ZeroRows::Allow.check("SELECT 1 WHERE false", rows).is_ok());
        }
    }

    #[test]
    fn refuse_fails_only_an_empty_result_and_names_the_statement() {
        assert!(ZeroRows::Refuse.check("SELECT 1", 1).is_ok());
        assert!(ZeroRows::Refuse.check("SELECT 1", 3).is_ok());
        let text = refusal(ZeroRows::Refuse.check("-- A header.\nSELECT sealed\n  FROM credential_cache", 0));
        assert_eq!(
            text.as_deref(),
            Some(
                "zero-row result (this statement would hang Spin 4.0.x's PostgreSQL host, spin issue 3671): \
                 SELECT sealed FROM credential_cache"
            )
        );
    }

    #[test]
    fn a_long_statement_is_cut_on_a_character_boundary() {
        let statement = format!("SELECT '{}'", "é".repeat(500));
        let text = refusal(ZeroRows::Refuse.check(&statement, 0)).unwrap_or_default();
        let quoted = text.split_once(": ").map(|(_, q)| q).unwrap_or_default();
        assert_eq!(quoted.chars().count(), QUOTED_STATEMENT_CHARS + 3);
        assert!(quoted.starts_with("SELECT 'é") && quoted.ends_with("..."));
    }
}
