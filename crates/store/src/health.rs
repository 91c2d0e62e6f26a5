use spin_sdk::pg4::Connection;

use crate::StoreError;

/// Proves the database answers queries, not merely that a connection opened.
pub fn ping(db: &Connection) -> Result<(), StoreError> {
    db.query("SELECT 1", &[])?;
    Ok(())
}
