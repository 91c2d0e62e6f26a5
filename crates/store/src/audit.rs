//! What happened to calls, for the people who look after them: every call page by page with
//! filters, and the callback attempts of one call. Both are computed by the database and
//! answer one jsonb value (see `rows.rs`), which is the route's answer as it stands: it is
//! decoded as the caller's type for that answer.

use gatehouse_domain::ToolCallId;
use serde::de::DeserializeOwned;
use spin_sdk::pg4::{Connection, ParameterValue};

use crate::rows::{optional, optional_text};
use crate::{MAX_CURSOR_MICROS, StoreError};

pub(crate) const CALLS: &str = include_str!("sql/audit/calls.sql");
pub(crate) const CALLBACKS: &str = include_str!("sql/audit/callbacks.sql");

/// The most callback attempts one answer lists.
pub const MAX_CALLBACK_ATTEMPTS: u32 = 200;

/// Where a page of calls starts: just after the call created at this instant with this id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallCursor {
    pub created_at_micros: i64,
    pub tool_call_id: ToolCallId,
}

impl CallCursor {
    /// Reads the `next_cursor` a previous page answered (`<micros>_<tool_call_id>`).
    pub fn parse(text: &str) -> Option<CallCursor> {
        let (micros, id) = text.split_once('_')?;
        // The id itself holds an underscore (`tc_...`), so the split is at the first one.
        let created_at_micros = micros.parse().ok().filter(|m: &i64| (0..=MAX_CURSOR_MICROS).contains(m))?;
        Some(CallCursor { created_at_micros, tool_call_id: ToolCallId::parse(id).ok()? })
    }
}

/// Which calls to list; each filter is exact, and they combine.
#[derive(Debug, Clone)]
pub struct CallFilter<'a> {
    /// The tenant whose calls they are.
    pub tenant: &'a str,
    pub session_id: Option<&'a str>,
    pub function_name: Option<&'a str>,
    /// The status as routes report it (a waiting call past its deadline is EXPIRED).
    pub status: Option<&'a str>,
    pub after: Option<CallCursor>,
    pub limit: u32,
}

/// `{calls: [...], next_cursor}`: newest first, each call as `tool_call_summary_json` shows it;
/// `next_cursor` is null on the last page.
pub fn list_calls<T: DeserializeOwned>(db: &Connection, filter: &CallFilter<'_>) -> Result<T, StoreError> {
    let cursor = filter.after.as_ref();
    optional(
        db,
        CALLS,
        &[
            optional_text(filter.session_id),
            optional_text(filter.function_name),
            optional_text(filter.status),
            cursor.map_or(ParameterValue::DbNull, |c| ParameterValue::Int64(c.created_at_micros)),
            cursor.map_or(ParameterValue::DbNull, |c| ParameterValue::Str(c.tool_call_id.to_string())),
            ParameterValue::Int64(i64::from(filter.limit)),
            ParameterValue::Str(filter.tenant.to_owned()),
        ],
    )?
    .ok_or_else(|| StoreError::Unexpected("the calls query returned nothing".into()))
}

/// `{tool_call_id, callbacks: [...]}`, oldest attempt first; `None` when the tenant has no such call.
pub fn callback_attempts<T: DeserializeOwned>(
    db: &Connection,
    tenant: &str,
    id: &ToolCallId,
) -> Result<Option<T>, StoreError> {
    optional(
        db,
        CALLBACKS,
        &[
            ParameterValue::Str(id.to_string()),
            ParameterValue::Int64(i64::from(MAX_CALLBACK_ATTEMPTS)),
            ParameterValue::Str(tenant.to_owned()),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_read_back_what_a_page_answered() {
        let cursor = CallCursor::parse("1763840000123456_tc_0123456789ab");
        assert_eq!(cursor.as_ref().map(|c| c.created_at_micros), Some(1_763_840_000_123_456));
        assert_eq!(cursor.map(|c| c.tool_call_id.to_string()).as_deref(), Some("tc_0123456789ab"));
        for bad in
            ["", "12", "12_", "_tc_0123456789ab", "a_tc_0123456789ab", "-1_tc_0123456789ab", "12_tc_XYZ", "12_42"]
        {
            assert_eq!(CallCursor::parse(bad), None, "{bad}");
        }
    }
}
