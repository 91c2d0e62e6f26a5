//! The search itself: one parameterized statement that finds the `top_k` nearest documents
//! and, when the search asks for totals, counts and totals every document the filters match.
//!
//! The nearest are found through a nearest-neighbour index, which reads a bounded share of the
//! documents and is approximate, unless the filters match few documents: then every match's
//! distance is computed and sorted, which is exact. A filtered search first asks the planner
//! how many documents its filters match (`EXPLAIN`, one more round trip); an index walk that
//! must skip most of what it reads finds ten matches, but not the nearest ten
//! (docs/architecture.md, "Vector search").
//!
//! Totals cover all filter matches, not only the documents returned: "Q3 revenue in the
//! Northwest" is a sum over the Northwest's Q3 documents, and it must not change with how the
//! question was phrased or with `top_k`. The filters say which documents count; the semantic
//! query only ranks them. Counting is a scan of every match, so it is done only for totals:
//! a search without them stays an index scan that stops at `top_k`.
//!
//! The statement answers exactly one row, whatever matches: the documents are one jsonb array
//! (empty when nothing matches) and every column is a scalar subquery. Spin 4.0.x's PostgreSQL
//! host never answers a `query` with zero rows (spinframework/spin issue 3671), so a search
//! that found nothing must still be a row; `run` refuses any other count.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use spin_sdk::pg4::{Connection, DbValue, ParameterValue};

use gatehouse_domain::sql::PLANNED_EACH_TIME;

use crate::SearchError;
use crate::query::{Filters, SearchQuery};

/// What the statement found.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Nearest first.
    pub documents: Vec<Document>,
    /// How many documents the filters match; `None` when the search asked for no totals, so
    /// nothing was counted.
    pub matched: Option<u64>,
    /// One per `aggregate` field, in the order asked.
    pub totals: Vec<Total>,
    /// How the nearest were found.
    pub order: Order,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Document {
    pub id: String,
    pub content: String,
    pub metadata: Map<String, Value>,
    /// `YYYY-MM-DD`
    pub doc_date: Option<String>,
    /// Cosine similarity to the query, 1 - cosine distance.
    pub score: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Total {
    pub field: String,
    pub sum: f64,
    /// How many matched documents hold a number in this field.
    pub counted: u64,
}

/// An SQL statement and its parameters. Only placeholders are ever formatted into the text.
#[derive(Debug)]
pub struct Statement {
    pub sql: String,
    pub params: Vec<ParameterValue>,
}

/// What every nearest-neighbour index over the documents is built on, and what the search
/// orders by: the embedding at half precision. An index of half the size is read in about 60%
/// of the time, and the order barely moves; the scores answered are computed at full precision
/// (docs/architecture.md, "Vector search").
pub const INDEXED_EMBEDDING: &str = "embedding::halfvec(384)";

/// The query vector, parsed once, at full precision for the score and at half for the order.
/// Written inline (`$1::text::vector` in the ORDER BY), a generic plan parses the text again for
/// every row it ranks: 34 µs a row, 114 ms for a filter with 3,351 matches. As a subquery it is
/// an InitPlan, evaluated once, and the index still orders by it.
const QUERY_VECTOR: &str = "(SELECT $1::text::vector)";
const QUERY_HALF_VECTOR: &str = "(SELECT $1::text::halfvec(384))";

/// The nearest documents, ordered through the index, as one jsonb array, nearest first by the
/// full-precision score.
const NEAREST: &str = "
    (SELECT coalesce(jsonb_agg(jsonb_build_object(
                'id', id, 'content', content, 'metadata', metadata, 'doc_date', doc_date,
                'score', round((1 - distance)::numeric, 4)) ORDER BY distance, id), '[]'::jsonb)
       FROM (SELECT id, content, metadata, doc_date, embedding <=> {query} AS distance
               FROM documents
              WHERE {where}
              ORDER BY {order}
              LIMIT $2) nearest)";

/// Per aggregate field, in the order asked: the sum of its numeric values over every match,
/// and how many matches have one.
const TOTALS: &str = "
    (SELECT coalesce(jsonb_agg(jsonb_build_object('field', field, 'sum', total, 'counted', counted)
                               ORDER BY position), '[]'::jsonb)
       FROM (SELECT f.field, f.position,
                    coalesce(sum(CASE WHEN jsonb_typeof(m.metadata -> f.field) = 'number'
                                      THEN (m.metadata ->> f.field)::numeric END), 0) AS total,
                    count(*) FILTER (WHERE jsonb_typeof(m.metadata -> f.field) = 'number') AS counted
               FROM unnest(${fields}::text[]) WITH ORDINALITY AS f(field, position)
               LEFT JOIN matched m ON true
              GROUP BY f.field, f.position) totals)";

/// How the nearest documents are found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Through a nearest-neighbour index on [`INDEXED_EMBEDDING`]: a bounded share of the
    /// documents is read, and the answer is approximate.
    Indexed,
    /// Every match's distance at full precision, sorted: exact, and as costly as the matches
    /// are many. No index is built on that expression, so no index can serve it.
    Exact,
}

/// The most matches, as the planner estimates them, that a search sorts exactly. Measured at a
/// million documents: about 1,350 matches sorted exactly in 54–89 ms, 6,800 in 131–139 ms, where
/// the index found 0.78 of the nearest ten (docs/benchmarks.md).
pub const EXACT_UP_TO: u64 = 5_000;

/// The order for a search whose filters the planner expects to match `estimated` documents
/// (`None`: no filter, so every document matches).
pub fn order_for(estimated: Option<u64>) -> Order {
    match estimated {
        Some(matches) if matches <= EXACT_UP_TO => Order::Exact,
        _ => Order::Indexed,
    }
}

/// The statement that asks the planner how many of the tenant's documents the filters match,
/// with the values bound as the search binds them; `None` for a search without filters.
/// Its answer is `EXPLAIN`'s text, read by [`estimated_matches`].
pub fn estimate_statement(query: &SearchQuery, tenant: &str) -> Option<Statement> {
    if query.filters.is_empty() {
        return None;
    }
    let mut params = Vec::new();
    let filtered = filtered(&query.filters, tenant, &mut params);
    // `EXPLAIN` plans its statement with the values bound each time it runs, even when the
    // statement is prepared once and kept.
    Some(Statement { sql: format!("EXPLAIN SELECT 1 FROM documents WHERE {filtered}"), params })
}

/// The rows the plan's top node expects, from `EXPLAIN`'s first line, which ends
/// `(cost=0.00..23807.66 rows=1234 width=4)`.
pub fn estimated_matches(first_line: &str) -> Option<u64> {
    let (_, after) = first_line.rsplit_once(" rows=")?;
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The one statement a search runs; `gatehouse bench --scenario recall` runs it too, to compare
/// what the index finds with an exact search. With a filter on a metadata value it is planned
/// for the values each time it runs ([`PLANNED_EACH_TIME`]): a partial index built for one value
/// serves it only when the planner sees that value. Without, every run has the same best plan,
/// which the runner may keep.
pub fn statement(query: &SearchQuery, tenant: &str, embedding: &[f32], order: Order) -> Statement {
    let mut params =
        vec![ParameterValue::Str(vector_literal(embedding)), ParameterValue::Int64(i64::from(query.top_k))];
    let filtered = filtered(&query.filters, tenant, &mut params);
    let planned = if query.filters.names_metadata_values() { PLANNED_EACH_TIME } else { "" };
    let order_by = match order {
        Order::Indexed => format!("{INDEXED_EMBEDDING} <=> {QUERY_HALF_VECTOR}"),
        // Ties broken by id, so the same search answers the same documents.
        Order::Exact => "distance, id".to_owned(),
    };
    let nearest = NEAREST.replace("{where}", &filtered).replace("{query}", QUERY_VECTOR).replace("{order}", &order_by);
    if query.aggregate.is_empty() {
        return Statement { sql: format!("{planned}SELECT {nearest}, NULL::bigint, NULL::jsonb"), params };
    }
    params.push(ParameterValue::ArrayStr(query.aggregate.iter().cloned().map(Some).collect()));
    let totals = TOTALS.replace("{fields}", &params.len().to_string());
    let sql = format!(
        "{planned}WITH matched AS MATERIALIZED (SELECT metadata FROM documents WHERE {filtered})
         SELECT {nearest}, (SELECT count(*) FROM matched), {totals}"
    );
    Statement { sql, params }
}

/// The tenant's documents that the filters match, as an SQL condition; the values are appended
/// to `params`.
fn filtered(filters: &Filters, tenant: &str, params: &mut Vec<ParameterValue>) -> String {
    // Only the tenant's own documents (docs/architecture.md, "Tenants").
    let mut all = vec![format!("tenant_id = {}", bind(params, ParameterValue::Str(tenant.to_owned())))];
    all.extend(conditions(filters, params));
    all.join(" AND ")
}

/// The filters as SQL conditions, their values appended to `params`. Equality and region use
/// jsonb containment, which the GIN index on `metadata` serves.
fn conditions(filters: &Filters, params: &mut Vec<ParameterValue>) -> Vec<String> {
    let mut conditions = Vec::new();
    if let Some(start) = filters.date_start {
        let at = bind(params, ParameterValue::Date((start.year, start.month, start.day)));
        conditions.push(format!("doc_date >= {at}"));
    }
    if let Some(end) = filters.date_end {
        let at = bind(params, ParameterValue::Date((end.year, end.month, end.day)));
        conditions.push(format!("doc_date <= {at}"));
    }
    if !filters.regions.is_empty() {
        let any: Vec<String> = filters
            .regions
            .iter()
            .map(|region| format!("metadata @> {}", bind(params, jsonb(&json!({"region": region})))))
            .collect();
        conditions.push(format!("({})", any.join(" OR ")));
    }
    // One containment per key, not one for all: a partial index built for one key's value
    // (`gatehouse index --by KEY`) serves a search only when the planner finds that index's
    // own condition among the search's (docs/architecture.md, "Vector search").
    for (key, value) in &filters.equals {
        let at = bind(params, jsonb(&json!({ key: value })));
        conditions.push(format!("metadata @> {at}"));
    }
    conditions
}

/// Appends a parameter; answers its placeholder.
fn bind(params: &mut Vec<ParameterValue>, value: ParameterValue) -> String {
    params.push(value);
    format!("${}", params.len())
}

fn jsonb(value: &Value) -> ParameterValue {
    ParameterValue::Jsonb(value.to_string().into_bytes())
}

/// pgvector's text form, `[0.1,-0.2,...]`; bound as text and cast, since the interface has no
/// vector type.
fn vector_literal(embedding: &[f32]) -> String {
    let mut text = String::with_capacity(embedding.len() * 12);
    text.push('[');
    for (i, x) in embedding.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&x.to_string());
    }
    text.push(']');
    text
}

pub(crate) fn run(db: &Connection, query: &SearchQuery, tenant: &str, embedding: &[f32]) -> Result<Found, SearchError> {
    let order = order_for(estimate(db, query, tenant)?);
    let statement = statement(query, tenant, embedding, order);
    let rows = db.query(&statement.sql, &statement.params).map_err(|e| SearchError::Database(format!("{e:?}")))?;
    let row = single_row(rows.rows)?;
    let [documents, matched, totals] = <[DbValue; 3]>::try_from(row)
        .map_err(|row| SearchError::Database(format!("the search returned {} columns", row.len())))?;
    Ok(Found {
        documents: decode(&documents)?.unwrap_or_default(),
        matched: match matched {
            DbValue::Int64(n) => Some(u64::try_from(n).unwrap_or_default()),
            _ => None,
        },
        totals: decode(&totals)?.unwrap_or_default(),
        order,
    })
}

/// How many documents the planner expects the filters to match; `None` without filters.
fn estimate(db: &Connection, query: &SearchQuery, tenant: &str) -> Result<Option<u64>, SearchError> {
    let Some(statement) = estimate_statement(query, tenant) else { return Ok(None) };
    let rows = db.query(&statement.sql, &statement.params).map_err(|e| SearchError::Database(format!("{e:?}")))?;
    match rows.rows.first().and_then(|row| row.first()) {
        Some(DbValue::Str(line)) => estimated_matches(line)
            .map(Some)
            .ok_or_else(|| SearchError::Database(format!("the planner's estimate is unreadable: {line:?}"))),
        other => Err(SearchError::Database(format!("EXPLAIN answered {other:?}"))),
    }
}

/// The one row the statement is written to answer; any other count is a bug in the statement.
fn single_row(rows: Vec<Vec<DbValue>>) -> Result<Vec<DbValue>, SearchError> {
    let count = rows.len();
    match <[Vec<DbValue>; 1]>::try_from(rows) {
        Ok([row]) => Ok(row),
        Err(_) => Err(SearchError::Database(format!("the search answered {count} rows, not exactly one"))),
    }
}

fn decode<T: serde::de::DeserializeOwned>(value: &DbValue) -> Result<Option<T>, SearchError> {
    match value {
        DbValue::DbNull => Ok(None),
        DbValue::Jsonb(bytes) => serde_json::from_slice(bytes)
            .map(Some)
            .map_err(|e| SearchError::Database(format!("decoding the search result: {e}"))),
        other => Err(SearchError::Database(format!("expected jsonb, got {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::validate;

    fn indexed(query: &SearchQuery, tenant: &str, embedding: &[f32]) -> Statement {
        statement(query, tenant, embedding, Order::Indexed)
    }

    fn query(value: Value) -> SearchQuery {
        let Value::Object(map) = value else { panic!("not an object") };
        validate(map).map(|(_, q)| q).unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn a_search_without_totals_is_only_the_index_scan() {
        let statement = indexed(
            &query(json!({"user_query": "late trucks", "structured_query": {"filters": {"region": "Midwest"}}})),
            "acme",
            &[0.5],
        );
        assert!(!statement.sql.contains("matched"));
        assert!(statement.sql.contains("WHERE tenant_id = $3 AND (metadata @> $4)"), "{}", statement.sql);
        assert_eq!(statement.params.len(), 4);
        assert!(matches!(&statement.params[2], ParameterValue::Str(v) if v == "acme"));
    }

    #[test]
    fn an_unfiltered_search_is_only_the_index_scan_of_the_tenant() {
        let statement = indexed(&query(json!({"user_query": "late trucks"})), "default", &[0.5, -0.25]);
        assert!(!statement.sql.contains("matched"));
        assert!(statement.sql.contains("WHERE tenant_id = $3\n"), "{}", statement.sql);
        assert_eq!(statement.params.len(), 3);
        assert!(matches!(&statement.params[0], ParameterValue::Str(v) if v == "[0.5,-0.25]"));
        assert!(matches!(statement.params[1], ParameterValue::Int64(5)));
    }

    #[test]
    fn filters_become_placeholders_never_text() {
        let statement = indexed(
            &query(json!({
                "user_query": "x'; DROP TABLE documents; --",
                "structured_query": {
                    "filters": {"date_start": "2024-07-01", "date_end": "2024-09-30", "region": ["Northwest", "South'west"], "owner": "O'Brien"},
                    "aggregate": ["revenue"],
                    "top_k": 7
                }
            })),
            "default",
            &[0.0],
        );
        assert!(
            !statement.sql.contains("DROP") && !statement.sql.contains("O'Brien") && !statement.sql.contains("South")
        );
        let filtered = "tenant_id = $3 AND doc_date >= $4 AND doc_date <= $5 AND (metadata @> $6 OR metadata @> $7) \
                        AND metadata @> $8";
        assert_eq!(statement.sql.matches(filtered).count(), 2, "{}", statement.sql);
        assert!(statement.sql.contains("unnest($9::text[])"));
        assert_eq!(statement.params.len(), 9);
        assert!(matches!(statement.params[3], ParameterValue::Date((2024, 7, 1))));
        assert!(matches!(&statement.params[6], ParameterValue::Jsonb(v) if v == br#"{"region":"South'west"}"#));
        assert!(matches!(&statement.params[7], ParameterValue::Jsonb(v) if v == br#"{"owner":"O'Brien"}"#));
    }

    #[test]
    fn the_order_is_the_indexes_expression_and_the_score_full_precision() {
        let sql = indexed(&query(json!({"user_query": "x"})), "default", &[1.0]).sql;
        assert!(sql.contains(&format!("ORDER BY {INDEXED_EMBEDDING} <=> (SELECT $1::text::halfvec(384))")), "{sql}");
        assert!(sql.contains("embedding <=> (SELECT $1::text::vector) AS distance"), "{sql}");
        assert!(INDEXED_EMBEDDING.contains(&crate::DIMENSIONS.to_string()));
    }

    #[test]
    fn each_equality_is_a_containment_of_its_own_so_a_partial_index_can_serve_it() {
        let statement = indexed(
            &query(
                json!({"user_query": "x", "structured_query": {"filters": {"category": "sales_report", "product": "Falcon camera"}}}),
            ),
            "default",
            &[1.0],
        );
        assert!(statement.sql.contains("tenant_id = $3 AND metadata @> $4 AND metadata @> $5\n"), "{}", statement.sql);
        assert!(matches!(&statement.params[3], ParameterValue::Jsonb(v) if v == br#"{"category":"sales_report"}"#));
        assert!(matches!(&statement.params[4], ParameterValue::Jsonb(v) if v == br#"{"product":"Falcon camera"}"#));
    }

    #[test]
    fn a_filter_the_planner_expects_few_matches_for_is_sorted_exactly() {
        let asked = query(
            json!({"user_query": "x", "structured_query": {"filters": {"region": ["Midwest", "Gulf Coast"], "date_start": "2025-01-01"}}}),
        );
        let estimate = estimate_statement(&asked, "acme").unwrap_or_else(|| panic!("a filtered search is estimated"));
        assert_eq!(
            estimate.sql,
            "EXPLAIN SELECT 1 FROM documents WHERE tenant_id = $1 AND doc_date >= $2 AND (metadata @> $3 OR metadata @> $4)"
        );
        assert!(matches!(&estimate.params[0], ParameterValue::Str(v) if v == "acme"));
        assert!(matches!(&estimate.params[3], ParameterValue::Jsonb(v) if v == br#"{"region":"Gulf Coast"}"#));
        assert!(estimate_statement(&query(json!({"user_query": "x"})), "acme").is_none());

        let line = "Bitmap Heap Scan on documents  (cost=3775.23..23807.66 rows=1234 width=4)";
        assert_eq!(estimated_matches(line), Some(1234));
        assert_eq!(estimated_matches("Gather  (cost=1000.00..98000.50 rows=332474 width=4)"), Some(332474));
        assert_eq!(estimated_matches("Seq Scan on documents"), None);
        assert_eq!(order_for(Some(1234)), Order::Exact);
        assert_eq!(order_for(Some(EXACT_UP_TO)), Order::Exact);
        assert_eq!(order_for(Some(EXACT_UP_TO + 1)), Order::Indexed);
        assert_eq!(order_for(None), Order::Indexed);

        let exact = statement(&asked, "acme", &[1.0], Order::Exact).sql;
        for sql in [&exact, &indexed(&asked, "acme", &[1.0]).sql] {
            assert!(gatehouse_domain::sql::planned_each_time(sql), "{sql}");
        }
        for asked in [
            json!({"user_query": "x"}),
            json!({"user_query": "x", "structured_query": {"filters": {"date_start": "2025-01-01"}}}),
        ] {
            let kept = indexed(&query(asked), "acme", &[1.0]).sql;
            assert!(!gatehouse_domain::sql::planned_each_time(&kept), "{kept}");
        }
        assert!(exact.contains("ORDER BY distance, id\n") && !exact.contains(INDEXED_EMBEDDING), "{exact}");
    }

    /// The statement's text outside parentheses: its columns are all subqueries, so it reads
    /// from no table and answers one row even when nothing matches.
    fn outermost(sql: &str) -> String {
        let mut depth = 0usize;
        sql.chars()
            .filter(|&c| {
                let outside = depth == 0 && c != '(';
                match c {
                    '(' => depth += 1,
                    ')' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                outside && c != ')'
            })
            .collect()
    }

    #[test]
    fn the_statement_answers_one_row_whatever_matches() {
        for asked in [
            json!({"user_query": "x"}),
            json!({"user_query": "x", "structured_query": {"filters": {"region": "Nowhere"}, "aggregate": ["units"]}}),
        ] {
            let sql = indexed(&query(asked), "default", &[1.0]).sql;
            let outer = outermost(&sql);
            assert!(outer.contains("SELECT") && !outer.contains("FROM"), "{outer}");
        }
        assert!(single_row(vec![vec![DbValue::DbNull]]).is_ok());
        for count in [0, 2] {
            let rows = vec![vec![DbValue::DbNull]; count];
            let message = single_row(rows).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(message.contains(&format!("answered {count} rows")), "{message}");
        }
    }

    #[test]
    fn totals_without_filters_cover_every_document_of_the_tenant() {
        let statement = indexed(
            &query(json!({"user_query": "x", "structured_query": {"aggregate": ["units"]}})),
            "default",
            &[1.0],
        );
        assert!(statement.sql.contains("FROM documents WHERE tenant_id = $3)"), "{}", statement.sql);
        assert!(matches!(&statement.params[3], ParameterValue::ArrayStr(v) if v == &[Some("units".to_owned())]));
    }
}
