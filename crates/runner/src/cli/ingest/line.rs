//! One line of the JSONL input: `{id?, content, metadata?, doc_date?}`, checked before anything
//! reaches the model or the database, so a bad line is reported and skipped on its own.
use chrono::NaiveDate;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The longest id the `documents` table accepts.
const MAX_ID_CHARS: usize = 200;

#[derive(Debug)]
pub(super) struct Document {
    pub(crate) id: String,
    pub(crate) content: String,
    pub(crate) metadata: Value,
    pub(crate) doc_date: Option<NaiveDate>,
    /// Hex SHA-256 of `content`: what the stored embedding was computed from.
    pub(crate) content_hash: String,
}

/// The document a line describes, or why the line is skipped.
pub(super) fn parse(text: &str) -> Result<Document, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON ({e})"))?;
    let Value::Object(mut fields) = value else {
        return Err("not a JSON object".into());
    };
    let content = match fields.remove("content") {
        None | Some(Value::Null) => return Err("\"content\" is missing".into()),
        Some(Value::String(content)) if content.trim().is_empty() => return Err("\"content\" is empty".into()),
        Some(Value::String(content)) => content,
        Some(_) => return Err("\"content\" must be a string".into()),
    };
    // PostgreSQL text cannot hold NUL, and one such row would fail its whole batch.
    if content.contains('\0') {
        return Err("\"content\" contains a NUL character".into());
    }
    let content_hash = hex::encode(Sha256::digest(content.as_bytes()));
    let id = match fields.remove("id") {
        None | Some(Value::Null) => derived_id(&content_hash),
        Some(Value::String(id)) if id.is_empty() || id.chars().count() > MAX_ID_CHARS => {
            return Err(format!("\"id\" must be 1 to {MAX_ID_CHARS} characters"));
        }
        Some(Value::String(id)) if id.contains('\0') => return Err("\"id\" contains a NUL character".into()),
        Some(Value::String(id)) => id,
        Some(_) => return Err("\"id\" must be a string".into()),
    };
    let metadata = match fields.remove("metadata") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(metadata @ Value::Object(_)) if has_nul(&metadata) => {
            return Err("\"metadata\" contains a NUL character, which jsonb cannot store".into());
        }
        Some(metadata @ Value::Object(_)) => metadata,
        Some(_) => return Err("\"metadata\" must be a JSON object".into()),
    };
    let doc_date = match fields.remove("doc_date") {
        None | Some(Value::Null) => None,
        Some(Value::String(date)) => Some(parse_date(&date)?),
        Some(other) => return Err(format!("\"doc_date\" must be a date as YYYY-MM-DD, not {other}")),
    };
    Ok(Document { id, content, metadata, doc_date, content_hash })
}

/// The id of a document given without one: the same text always gets the same id, so a
/// re-run finds it again.
fn derived_id(content_hash: &str) -> String {
    format!("doc-{}", &content_hash[..32])
}

/// Exactly `YYYY-MM-DD`, a real calendar day.
fn parse_date(text: &str) -> Result<NaiveDate, String> {
    let shaped = text.len() == 10
        && text.bytes().enumerate().all(|(i, b)| if i == 4 || i == 7 { b == b'-' } else { b.is_ascii_digit() });
    shaped
        .then(|| NaiveDate::parse_from_str(text, "%Y-%m-%d").ok())
        .flatten()
        .ok_or_else(|| format!("\"doc_date\" must be a date as YYYY-MM-DD, not {text:?}"))
}

fn has_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(fields) => fields.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_full_line_keeps_its_fields() {
        let doc = parse(
            r#"{"id": "q3-nw", "content": "Q3 sales", "metadata": {"region": "Northwest"}, "doc_date": "2024-09-30"}"#,
        )
        .unwrap();
        assert_eq!(doc.id, "q3-nw");
        assert_eq!(doc.content, "Q3 sales");
        assert_eq!(doc.metadata, json!({"region": "Northwest"}));
        assert_eq!(doc.doc_date, NaiveDate::from_ymd_opt(2024, 9, 30));
        assert_eq!(doc.content_hash, hex::encode(Sha256::digest(b"Q3 sales")));
    }

    #[test]
    fn a_line_without_id_gets_one_from_its_content() {
        let a = parse(r#"{"content": "same text"}"#).unwrap();
        let b = parse(r#"{"content": "same text", "metadata": {"x": 1}}"#).unwrap();
        let c = parse(r#"{"content": "other text"}"#).unwrap();
        assert!(a.id.starts_with("doc-") && a.id.len() == 36, "{}", a.id);
        assert_eq!(a.id, b.id);
        assert_ne!(a.id, c.id);
        assert_eq!(a.metadata, json!({}));
        assert_eq!(a.doc_date, None);
    }

    #[test]
    fn bad_lines_say_what_is_wrong() {
        let cases = [
            ("{not json", "not valid JSON"),
            ("[1, 2]", "not a JSON object"),
            (r#"{"metadata": {}}"#, "\"content\" is missing"),
            (r#"{"content": "  "}"#, "\"content\" is empty"),
            (r#"{"content": 7}"#, "\"content\" must be a string"),
            (r#"{"content": "a\u0000b"}"#, "NUL"),
            (r#"{"content": "x", "id": ""}"#, "\"id\" must be 1 to 200 characters"),
            (r#"{"content": "x", "id": 5}"#, "\"id\" must be a string"),
            (r#"{"content": "x", "metadata": [1]}"#, "\"metadata\" must be a JSON object"),
            (r#"{"content": "x", "metadata": {"a": "\u0000"}}"#, "NUL"),
            (r#"{"content": "x", "doc_date": "2024-02-30"}"#, "\"doc_date\" must be a date as YYYY-MM-DD"),
            (r#"{"content": "x", "doc_date": "2024-2-3"}"#, "\"doc_date\" must be a date as YYYY-MM-DD"),
            (r#"{"content": "x", "doc_date": 20240203}"#, "\"doc_date\" must be a date as YYYY-MM-DD"),
        ];
        for (line, expected) in cases {
            let error = parse(line).expect_err(line);
            assert!(error.contains(expected), "{line}: {error}");
        }
    }
}
