//! The parameters of `query_vector_db` (docs/architecture.md, "Vector search"), checked and
//! normalized.
//!
//! The agent writes these from speech, so every problem names its field by path
//! (`structured_query.filters.date_end`) with a sentence that says how to fix it. The
//! normalized form is what the call stores: `structured_query` with `filters` and `aggregate`
//! always present, regions as a list, `top_k` filled in. `semantic_query` is stored only when
//! given, so a later correction of `user_query` also changes what is searched.

use gatehouse_domain::FieldProblem;
use serde_json::{Map, Value, json};

use crate::date::Date;

pub const DEFAULT_TOP_K: u32 = 5;
pub const MAX_TOP_K: u32 = 50;
const MAX_TEXT_CHARS: usize = 1000;
const MAX_NAME_CHARS: usize = 100;
const MAX_VALUE_CHARS: usize = 200;
const MAX_REGIONS: usize = 20;
const MAX_AGGREGATES: usize = 10;

const USER_QUERY: &str = "user_query";
const STRUCTURED: &str = "structured_query";
/// The filter keys with a meaning of their own; any other key is equality on metadata.
const DATE_START: &str = "date_start";
const DATE_END: &str = "date_end";
const REGION: &str = "region";

/// A validated search.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    pub user_query: String,
    /// What is embedded and searched for: `semantic_query`, or else `user_query`.
    pub semantic_query: String,
    pub filters: Filters,
    pub top_k: u32,
    /// Numeric metadata fields to total over every document the filters match.
    pub aggregate: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Filters {
    /// Inclusive bounds on `doc_date`.
    pub date_start: Option<Date>,
    pub date_end: Option<Date>,
    /// Any of these `metadata.region` values; empty for any region.
    pub regions: Vec<String>,
    /// Metadata keys that must hold exactly these values.
    pub equals: Map<String, Value>,
}

impl Filters {
    pub fn is_empty(&self) -> bool {
        self.date_start.is_none() && self.date_end.is_none() && self.regions.is_empty() && self.equals.is_empty()
    }

    /// Whether a filter names a metadata value (a region or an equality), which a partial
    /// index built for that value may serve.
    pub fn names_metadata_values(&self) -> bool {
        !self.regions.is_empty() || !self.equals.is_empty()
    }
}

/// Checks `parameters`; answers their normalized form and the search they describe, or every
/// problem found.
pub fn validate(parameters: Map<String, Value>) -> Result<(Map<String, Value>, SearchQuery), Vec<FieldProblem>> {
    let mut problems = Problems::default();
    for key in parameters.keys().filter(|k| *k != USER_QUERY && *k != STRUCTURED) {
        problems.add(key, "is not a parameter of this tool; it takes user_query and structured_query");
    }
    let user_query = text(parameters.get(USER_QUERY), USER_QUERY, &mut problems);
    let empty = Map::new();
    let structured = match parameters.get(STRUCTURED) {
        None => &empty,
        Some(Value::Object(structured)) => structured,
        Some(_) => {
            problems.add(STRUCTURED, "must be an object with semantic_query, filters, top_k and aggregate");
            &empty
        }
    };
    let query = structured_query(structured, user_query.clone(), &mut problems);
    let (Some(user_query), Some(query)) = (user_query, query) else {
        return Err(problems.into_list());
    };
    if !problems.is_empty() {
        return Err(problems.into_list());
    }
    let mut normalized = Map::new();
    normalized.insert(USER_QUERY.into(), json!(user_query));
    normalized.insert(STRUCTURED.into(), normalized_structured(&query, structured));
    Ok((normalized, query))
}

/// The search a stored (already normalized) call describes.
pub fn parse(parameters: &Map<String, Value>) -> Result<SearchQuery, Vec<FieldProblem>> {
    validate(parameters.clone()).map(|(_, query)| query)
}

#[derive(Default)]
struct Problems(Vec<FieldProblem>);

impl Problems {
    fn add(&mut self, field: impl Into<String>, problem: impl Into<String>) {
        self.0.push(FieldProblem::new(field, problem));
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn into_list(self) -> Vec<FieldProblem> {
        self.0
    }
}

fn structured_query(
    structured: &Map<String, Value>,
    user_query: Option<String>,
    problems: &mut Problems,
) -> Option<SearchQuery> {
    const KNOWN: [&str; 4] = ["semantic_query", "filters", "top_k", "aggregate"];
    for key in structured.keys().filter(|k| !KNOWN.contains(&k.as_str())) {
        let problem = if [DATE_START, DATE_END, REGION].contains(&key.as_str()) {
            format!("belongs in {STRUCTURED}.filters.{key}")
        } else {
            "is not part of a structured query, which has semantic_query, filters, top_k and aggregate".to_owned()
        };
        problems.add(format!("{STRUCTURED}.{key}"), problem);
    }
    let semantic_query = match structured.get("semantic_query") {
        None => user_query.clone(),
        value => text(value, &format!("{STRUCTURED}.semantic_query"), problems),
    };
    let filters = filters(structured.get("filters"), problems);
    let top_k = top_k(structured.get("top_k"), problems);
    let aggregate = aggregate(structured.get("aggregate"), problems);
    Some(SearchQuery {
        user_query: user_query?,
        semantic_query: semantic_query?,
        filters: filters?,
        top_k: top_k?,
        aggregate: aggregate?,
    })
}

/// Required, non-blank text of reasonable length, trimmed.
fn text(value: Option<&Value>, field: &str, problems: &mut Problems) -> Option<String> {
    match value {
        None => problems.add(field, "is required: say what to search for"),
        Some(Value::String(s)) if s.trim().is_empty() => problems.add(field, "must not be empty"),
        Some(Value::String(s)) if s.chars().count() > MAX_TEXT_CHARS => {
            problems.add(field, format!("must be at most {MAX_TEXT_CHARS} characters"));
        }
        Some(Value::String(s)) => return Some(s.trim().to_owned()),
        Some(_) => problems.add(field, "must be text"),
    }
    None
}

fn filters(value: Option<&Value>, problems: &mut Problems) -> Option<Filters> {
    let field = format!("{STRUCTURED}.filters");
    let filters = match value {
        None => return Some(Filters::default()),
        Some(Value::Object(filters)) => filters,
        Some(_) => {
            problems
                .add(&field, "must be an object, e.g. {\"region\": [\"Northwest\"], \"date_start\": \"2024-07-01\"}");
            return None;
        }
    };
    let before = problems.0.len();
    let mut result = Filters {
        date_start: date(filters.get(DATE_START), &format!("{field}.{DATE_START}"), problems),
        date_end: date(filters.get(DATE_END), &format!("{field}.{DATE_END}"), problems),
        regions: regions(filters.get(REGION), &format!("{field}.{REGION}"), problems),
        equals: Map::new(),
    };
    if let (Some(start), Some(end)) = (result.date_start, result.date_end)
        && end < start
    {
        problems.add(format!("{field}.{DATE_END}"), format!("must not be before {DATE_START} ({start})"));
    }
    for (key, value) in filters.iter().filter(|(k, _)| ![DATE_START, DATE_END, REGION].contains(&k.as_str())) {
        let key_field = format!("{field}.{key}");
        if !is_field_name(key) {
            problems.add(
                &key_field,
                format!("is not a metadata field name (letters, digits, _ and -, at most {MAX_NAME_CHARS})"),
            );
            continue;
        }
        match value {
            Value::String(s) if s.trim().is_empty() => problems.add(&key_field, "must not be empty"),
            Value::String(s) if s.chars().count() > MAX_VALUE_CHARS => {
                problems.add(&key_field, format!("must be at most {MAX_VALUE_CHARS} characters"));
            }
            Value::String(s) => {
                result.equals.insert(key.clone(), json!(s.trim()));
            }
            Value::Number(_) | Value::Bool(_) => {
                result.equals.insert(key.clone(), value.clone());
            }
            Value::Array(_) => problems
                .add(&key_field, "must be a single value (text, a number or true/false); only region takes a list"),
            _ => problems.add(&key_field, "must be text, a number or true/false"),
        }
    }
    (problems.0.len() == before).then_some(result)
}

/// Absent, or a date written `YYYY-MM-DD`. A problem leaves the filter out of the result,
/// which is discarded anyway because the problem is reported.
fn date(value: Option<&Value>, field: &str, problems: &mut Problems) -> Option<Date> {
    let value = value?;
    match value.as_str().map(str::trim).and_then(Date::parse) {
        Some(date) => Some(date),
        None => {
            problems.add(field, "must be a date written YYYY-MM-DD, e.g. 2024-07-01");
            None
        }
    }
}

/// One region or a list of them, each in the corpus's casing ("north west" → "North West").
fn regions(value: Option<&Value>, field: &str, problems: &mut Problems) -> Vec<String> {
    let names: Vec<&Value> = match value {
        None => return Vec::new(),
        Some(Value::Array(list)) if list.is_empty() => {
            problems.add(field, "must name at least one region, or be left out for every region");
            return Vec::new();
        }
        Some(Value::Array(list)) if list.len() > MAX_REGIONS => {
            problems.add(field, format!("can name at most {MAX_REGIONS} regions"));
            return Vec::new();
        }
        Some(Value::Array(list)) => list.iter().collect(),
        Some(single) => vec![single],
    };
    let mut regions: Vec<String> = Vec::new();
    for name in names {
        match name.as_str().map(canonical_region) {
            Some(region) if region.is_empty() => problems.add(field, "must not contain an empty region name"),
            Some(region) if region.chars().count() > MAX_VALUE_CHARS => {
                problems.add(field, format!("region names are at most {MAX_VALUE_CHARS} characters"));
            }
            Some(region) if !regions.contains(&region) => regions.push(region),
            Some(_) => {}
            None => problems.add(field, "must be a region name or a list of region names"),
        }
    }
    regions
}

/// Region names are stored capitalized word by word ("Northwest", "New England"); a
/// transcription's casing and spacing should not make a filter miss.
fn canonical_region(name: &str) -> String {
    let words = name.split_whitespace().map(|word| {
        let mut chars = word.chars();
        let first = chars.next().map(|c| c.to_uppercase().collect::<String>()).unwrap_or_default();
        first + chars.as_str().to_lowercase().as_str()
    });
    words.collect::<Vec<_>>().join(" ")
}

fn top_k(value: Option<&Value>, problems: &mut Problems) -> Option<u32> {
    let field = format!("{STRUCTURED}.top_k");
    let Some(value) = value else { return Some(DEFAULT_TOP_K) };
    let whole = value.as_u64().or_else(|| value.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64));
    match whole.and_then(|n| u32::try_from(n).ok()).filter(|n| (1..=MAX_TOP_K).contains(n)) {
        Some(top_k) => Some(top_k),
        None => {
            problems.add(field, format!("must be a whole number from 1 to {MAX_TOP_K}"));
            None
        }
    }
}

fn aggregate(value: Option<&Value>, problems: &mut Problems) -> Option<Vec<String>> {
    let field = format!("{STRUCTURED}.aggregate");
    let names: Vec<&Value> = match value {
        None => return Some(Vec::new()),
        Some(Value::Array(list)) if list.len() > MAX_AGGREGATES => {
            problems.add(&field, format!("can total at most {MAX_AGGREGATES} fields"));
            return None;
        }
        Some(Value::Array(list)) => list.iter().collect(),
        Some(single @ Value::String(_)) => vec![single],
        Some(_) => {
            problems.add(&field, "must be a list of numeric metadata field names, e.g. [\"revenue\", \"units\"]");
            return None;
        }
    };
    let mut fields: Vec<String> = Vec::new();
    let mut ok = true;
    for name in names {
        match name.as_str().map(str::trim) {
            Some(name) if is_field_name(name) => {
                if !fields.iter().any(|f| f == name) {
                    fields.push(name.to_owned());
                }
            }
            _ => {
                ok = false;
                problems.add(
                    &field,
                    format!("must list metadata field names (letters, digits, _ and -, at most {MAX_NAME_CHARS})"),
                );
            }
        }
    }
    ok.then_some(fields)
}

/// A metadata key a filter or a total may name: letters, digits, `_` and `-`, at most 100.
pub fn is_field_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_CHARS
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn normalized_structured(query: &SearchQuery, given: &Map<String, Value>) -> Value {
    let mut filters = Map::new();
    if let Some(start) = query.filters.date_start {
        filters.insert(DATE_START.into(), json!(start.to_string()));
    }
    if let Some(end) = query.filters.date_end {
        filters.insert(DATE_END.into(), json!(end.to_string()));
    }
    if !query.filters.regions.is_empty() {
        filters.insert(REGION.into(), json!(query.filters.regions));
    }
    filters.extend(query.filters.equals.clone());
    let mut structured = Map::new();
    if given.contains_key("semantic_query") {
        structured.insert("semantic_query".into(), json!(query.semantic_query));
    }
    structured.insert("filters".into(), Value::Object(filters));
    structured.insert("top_k".into(), json!(query.top_k));
    structured.insert("aggregate".into(), json!(query.aggregate));
    Value::Object(structured)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    fn problems(value: Value) -> Vec<(String, String)> {
        match validate(params(value)) {
            Ok(_) => Vec::new(),
            Err(problems) => problems.into_iter().map(|p| (p.field, p.problem)).collect(),
        }
    }

    fn fields(value: Value) -> Vec<String> {
        problems(value).into_iter().map(|(field, _)| field).collect()
    }

    #[test]
    fn normalizes_the_seed_query() {
        let (normalized, query) = validate(params(json!({
            "user_query": " Q3 sales data northwest ",
            "structured_query": {
                "semantic_query": "quarterly sales northwest",
                "filters": {"date_start": "2024-07-01", "date_end": "2024-09-30", "region": "northwest", "category": "sales_report"},
                "aggregate": "revenue"
            }
        })))
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(query.user_query, "Q3 sales data northwest");
        assert_eq!(query.semantic_query, "quarterly sales northwest");
        assert_eq!(query.filters.regions, ["Northwest"]);
        assert_eq!(query.filters.equals, params(json!({"category": "sales_report"})));
        assert_eq!(query.top_k, DEFAULT_TOP_K);
        assert_eq!(query.aggregate, ["revenue"]);
        assert_eq!(
            Value::Object(normalized.clone()),
            json!({
                "user_query": "Q3 sales data northwest",
                "structured_query": {
                    "semantic_query": "quarterly sales northwest",
                    "filters": {"date_start": "2024-07-01", "date_end": "2024-09-30", "region": ["Northwest"], "category": "sales_report"},
                    "top_k": 5,
                    "aggregate": ["revenue"]
                }
            })
        );
        // Normalizing is idempotent, so a stored call reads back as the same search.
        assert_eq!(parse(&normalized).ok(), Some(query));
    }

    #[test]
    fn semantic_query_defaults_to_the_user_query_without_being_stored() {
        let (normalized, query) =
            validate(params(json!({"user_query": "late shipments"}))).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(query.semantic_query, "late shipments");
        assert!(query.filters.is_empty());
        assert_eq!(normalized["structured_query"], json!({"filters": {}, "top_k": 5, "aggregate": []}));
    }

    #[test]
    fn names_every_problem_by_its_path() {
        assert_eq!(fields(json!({})), ["user_query"]);
        assert_eq!(
            fields(
                json!({"user_query": "x", "structured_query": {"filters": {"date_start": "2024-09-30", "date_end": "2024-07-01"}}})
            ),
            ["structured_query.filters.date_end"]
        );
        assert_eq!(
            fields(json!({"user_query": "x", "structured_query": {"filters": {"date_start": "July 1st"}}})),
            ["structured_query.filters.date_start"]
        );
        assert_eq!(
            fields(json!({"user_query": "", "structured_query": {"top_k": 51, "aggregate": [3], "semantic_query": 7}})),
            ["user_query", "structured_query.semantic_query", "structured_query.top_k", "structured_query.aggregate"]
        );
        assert_eq!(fields(json!({"user_query": "x", "structured_query": "sales"})), ["structured_query"]);
        assert_eq!(fields(json!({"user_query": "x", "limit": 3})), ["limit"]);
        assert_eq!(
            fields(
                json!({"user_query": "x", "structured_query": {"filters": {"region": [], "tags": ["a"], "owner": null, "bad key": 1}}})
            ),
            [
                "structured_query.filters.region",
                "structured_query.filters.bad key",
                "structured_query.filters.owner",
                "structured_query.filters.tags"
            ]
        );
    }

    #[test]
    fn points_misplaced_filters_to_where_they_belong() {
        let found = problems(json!({"user_query": "x", "structured_query": {"region": "Northwest"}}));
        assert_eq!(
            found,
            [("structured_query.region".to_owned(), "belongs in structured_query.filters.region".to_owned())]
        );
    }

    #[test]
    fn bounds_top_k() {
        for (top_k, ok) in [
            (json!(1), true),
            (json!(50), true),
            (json!(10.0), true),
            (json!(0), false),
            (json!(51), false),
            (json!(2.5), false),
            (json!("5"), false),
            (json!(-1), false),
        ] {
            let result = validate(params(json!({"user_query": "x", "structured_query": {"top_k": top_k}})));
            assert_eq!(result.is_ok(), ok, "{top_k}");
        }
    }

    #[test]
    fn regions_are_deduplicated_in_the_corpus_casing() {
        let (_, query) = validate(params(json!({
            "user_query": "x",
            "structured_query": {"filters": {"region": ["NORTHWEST", "northwest", " new   england "]}}
        })))
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(query.filters.regions, ["Northwest", "New England"]);
    }
}
