use spin_sdk::pg4::Connection;

use crate::StoreError;
use crate::rows::one_row;

/// Answers one row, as every statement sent through `query` must (see `rows.rs`).
pub(crate) const PING: &str = "SELECT 1";

/// Proves the database answers queries, not merely that a connection opened.
pub fn ping(db: &Connection) -> Result<(), StoreError> {
    one_row(db, PING, &[])?;
    Ok(())
}
