use gatehouse_domain::ApiError;
use spin_sdk::pg4::Connection;
use spin_sdk::variables;

/// Opens the application database named by the `db_url` variable.
///
/// The URL may carry a password, so it is kept out of the client's error and scrubbed
/// from the operator's detail too, in case the host quotes it back.
pub fn open_db() -> Result<Connection, ApiError> {
    let url = variables::get("db_url")
        .map_err(|e| ApiError::internal().with_detail(format!("reading the db_url variable: {e:?}")))?;
    Connection::open(&url).map_err(|e| {
        let detail = format!("opening the database: {e:?}").replace(&url, "<db_url>");
        ApiError::database_unavailable().with_detail(detail)
    })
}
