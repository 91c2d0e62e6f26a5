use gatehouse_domain::ApiError;
use spin_sdk::pg4::{PgError, QueryError};
use thiserror::Error;

/// Why a store call failed. The messages are for operators; clients see the `ApiError`
/// this converts into.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The database cannot be reached or is refusing work; retrying later may succeed.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    #[error("query failed: {0}")]
    Query(String),
    /// The database answered with something this code does not understand: a bug or a
    /// schema that is out of step with the code.
    #[error("unexpected query result: {0}")]
    Unexpected(String),
}

impl From<PgError> for StoreError {
    fn from(error: PgError) -> Self {
        match &error {
            PgError::ConnectionFailed(message) => StoreError::Unavailable(message.clone()),
            PgError::QueryFailed(QueryError::DbError(db)) if is_unavailable(&db.code) => {
                StoreError::Unavailable(format!("{} ({})", db.message, db.code))
            }
            PgError::QueryFailed(QueryError::DbError(db)) => StoreError::Query(format!("{} ({})", db.message, db.code)),
            other => StoreError::Query(format!("{other:?}")),
        }
    }
}

/// SQLSTATEs that mean "the server is not available right now" rather than "this query
/// is wrong": connection exceptions (08), insufficient resources (53, e.g. too many
/// connections) and shutdown or startup in progress (57P01-57P03).
fn is_unavailable(sqlstate: &str) -> bool {
    sqlstate.starts_with("08") || sqlstate.starts_with("53") || matches!(sqlstate, "57P01" | "57P02" | "57P03")
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        let detail = error.to_string();
        match error {
            StoreError::Unavailable(_) => ApiError::database_unavailable().with_detail(detail),
            StoreError::Query(_) | StoreError::Unexpected(_) => ApiError::internal().with_detail(detail),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_sqlstates() {
        for code in ["08006", "08001", "53300", "57P01", "57P03"] {
            assert!(is_unavailable(code), "{code}");
        }
        for code in ["42P01", "23505", "40001", "57014", "22P02"] {
            assert!(!is_unavailable(code), "{code}");
        }
    }
}
