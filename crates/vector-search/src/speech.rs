//! What the agent says about a search: the sentence that asks the caller to confirm it, and
//! the one or two sentences that report what it found, with the key figures.

use serde_json::Value;

use crate::date::{Date, period_name, spoken_range};
use crate::query::{Filters, SearchQuery};
use crate::search::{Found, Total};

/// "I'll search for quarterly sales in Northwest between July 1 and September 30, 2024. Is that right?"
pub fn confirmation(query: &SearchQuery) -> String {
    let mut sentence = format!("I'll search for {}", query.semantic_query);
    sentence.push_str(&regions(&query.filters.regions));
    if let Some(dates) = dates_between(&query.filters) {
        sentence.push_str(&dates);
    }
    sentence.push_str(&equalities(&query.filters));
    if !query.aggregate.is_empty() {
        let fields: Vec<String> = query.aggregate.iter().map(|f| field_words(f)).collect();
        sentence.push_str(&format!(", and total the {}", list(&fields)));
    }
    sentence.push_str(". Is that right?");
    sentence
}

/// "I found 12 documents about quarterly sales in Northwest from Q3 2024; revenue totals $4.2M."
pub fn report(query: &SearchQuery, found: &Found) -> String {
    let about = format!("about {}", query.semantic_query);
    let scope =
        format!("{}{}{}", regions(&query.filters.regions), dates_compact(&query.filters), equalities(&query.filters));
    let count = found.matched.unwrap_or(found.documents.len() as u64);
    if count == 0 || found.documents.is_empty() {
        return format!("I found no documents {about}{scope}.");
    }
    let noun = if count == 1 { "document" } else { "documents" };
    let shown = found.documents.len() as u64;
    // Without filters every document is a candidate: the count is only how many were kept.
    let mut sentence = match found.matched {
        Some(_) => format!("I found {} {noun} {about}{scope}", count_words(count)),
        None => format!(
            "Here {} the {} closest {noun} {about}{scope}",
            if count == 1 { "is" } else { "are" },
            count_words(count)
        ),
    };
    if found.totals.is_empty() {
        if shown < count {
            sentence.push_str(&format!(" and kept the {shown} closest"));
        }
        if let Some(best) = found.documents.first() {
            sentence.push_str(&format!("; the best match{}: {}", best_date(&best.doc_date), opening(&best.content)));
        }
        sentence.push('.');
        return sentence;
    }
    let totals: Vec<String> = found.totals.iter().map(total_phrase).collect();
    sentence.push_str(&format!("; {}", list(&totals)));
    if shown < count {
        sentence.push_str(&format!(" across all {} of them", count_words(count)));
    }
    sentence.push('.');
    sentence
}

fn best_date(doc_date: &Option<String>) -> String {
    doc_date.as_deref().and_then(Date::parse).map(|d| format!(" ({})", d.spoken())).unwrap_or_default()
}

/// The first sentence of a document, short enough to say.
fn opening(content: &str) -> String {
    const MAX_CHARS: usize = 160;
    // A full stop within the first few words is more likely "Co." or "Q3." than a sentence end.
    const MIN_SENTENCE: usize = 20;
    let content = content.trim();
    let sentence = match content.get(MIN_SENTENCE..).and_then(|rest| rest.find(". ")) {
        Some(at) => &content[..MIN_SENTENCE + at],
        None => content.strip_suffix('.').unwrap_or(content),
    };
    if sentence.chars().count() <= MAX_CHARS {
        return sentence.to_owned();
    }
    let cut: String = sentence.chars().take(MAX_CHARS).collect();
    let cut = cut.rsplit_once(' ').map_or(cut.as_str(), |(head, _)| head);
    format!("{cut}…")
}

fn total_phrase(total: &Total) -> String {
    let words = field_words(&total.field);
    if total.counted == 0 {
        return format!("none of them has a {words} figure");
    }
    let verb = if words.ends_with('s') && !words.ends_with("ss") { "total" } else { "totals" };
    format!("{words} {verb} {}", amount(&total.field, total.sum))
}

/// " in Northwest", " in Northwest and Southwest"
fn regions(regions: &[String]) -> String {
    if regions.is_empty() { String::new() } else { format!(" in {}", list(regions)) }
}

/// For the confirmation: explicit dates, so a wrong one is heard.
fn dates_between(filters: &Filters) -> Option<String> {
    Some(match (filters.date_start, filters.date_end) {
        (Some(start), Some(end)) if start == end => format!(" on {}", start.spoken()),
        (Some(start), Some(end)) => format!(" between {}", spoken_range(start, end).replacen(" to ", " and ", 1)),
        (Some(start), None) => format!(" from {} on", start.spoken()),
        (None, Some(end)) => format!(" up to {}", end.spoken()),
        (None, None) => return None,
    })
}

/// For the report: the period's name when it has one ("from Q3 2024").
fn dates_compact(filters: &Filters) -> String {
    match (filters.date_start, filters.date_end) {
        (Some(start), Some(end)) => match period_name(start, end) {
            Some(period) => format!(" from {period}"),
            None => dates_between(filters).unwrap_or_default(),
        },
        _ => dates_between(filters).unwrap_or_default(),
    }
}

/// " where category is sales_report and channel is retail"
fn equalities(filters: &Filters) -> String {
    if filters.equals.is_empty() {
        return String::new();
    }
    let conditions: Vec<String> = filters
        .equals
        .iter()
        .map(|(key, value)| {
            let value = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("{} is {value}", field_words(key))
        })
        .collect();
    format!(" where {}", conditions.join(" and "))
}

/// "a", "a and b", "a, b and c"
fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn field_words(field: &str) -> String {
    field.replace(['_', '-'], " ")
}

/// Field names that hold money, word by word: `pipeline_value`, `revenue_usd`, `arr`.
fn is_money(field: &str) -> bool {
    const MONEY: [&str; 14] = [
        "revenue", "amount", "value", "price", "cost", "costs", "spend", "budget", "profit", "arr", "mrr", "usd",
        "dollars", "sales",
    ];
    field.to_ascii_lowercase().split(['_', '-']).any(|word| MONEY.contains(&word))
}

/// A total as it is said: "$4.2M", "$48,500", "12,450", "3.5".
fn amount(field: &str, value: f64) -> String {
    if is_money(field) {
        let sign = if value < 0.0 { "-" } else { "" };
        let value = value.abs();
        return match value {
            v if v >= 1e9 => format!("{sign}${}B", one_decimal(v / 1e9)),
            v if v >= 1e6 => format!("{sign}${}M", one_decimal(v / 1e6)),
            v => format!("{sign}${}", grouped(v.round())),
        };
    }
    if value.fract() == 0.0 || value.abs() >= 100.0 {
        let sign = if value < 0.0 { "-" } else { "" };
        format!("{sign}{}", grouped(value.abs().round()))
    } else {
        one_decimal(value)
    }
}

fn count_words(count: u64) -> String {
    grouped(count as f64)
}

/// "4.2", "4" (no trailing ".0").
fn one_decimal(value: f64) -> String {
    let text = format!("{value:.1}");
    text.strip_suffix(".0").map(str::to_owned).unwrap_or(text)
}

/// A whole, non-negative number with thousands separators.
fn grouped(value: f64) -> String {
    let digits = format!("{value:.0}");
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, json};

    use super::*;
    use crate::query::validate;
    use crate::search::{Document, Order};

    fn query(value: Value) -> SearchQuery {
        let Value::Object(map) = value else { panic!("not an object") };
        validate(map).map(|(_, q)| q).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn seed() -> SearchQuery {
        query(json!({
            "user_query": "Q3 sales data northwest",
            "structured_query": {
                "semantic_query": "quarterly sales",
                "filters": {"date_start": "2024-07-01", "date_end": "2024-09-30", "region": ["Northwest"]},
                "aggregate": ["revenue", "units"]
            }
        }))
    }

    fn document(id: &str, content: &str) -> Document {
        Document {
            id: id.into(),
            content: content.into(),
            metadata: Map::new(),
            doc_date: Some("2024-09-30".into()),
            score: 0.8,
        }
    }

    #[test]
    fn confirms_with_explicit_dates() {
        assert_eq!(
            confirmation(&seed()),
            "I'll search for quarterly sales in Northwest between July 1 and September 30, 2024, and total the revenue and units. Is that right?"
        );
        let open_ended = query(json!({
            "user_query": "late shipments",
            "structured_query": {"filters": {"date_start": "2025-01-15", "region": ["southwest", "midwest"], "carrier": "Ridgeline Freight"}}
        }));
        assert_eq!(
            confirmation(&open_ended),
            "I'll search for late shipments in Southwest and Midwest from January 15, 2025 on where carrier is Ridgeline Freight. Is that right?"
        );
        assert_eq!(confirmation(&query(json!({"user_query": "returns"}))), "I'll search for returns. Is that right?");
    }

    #[test]
    fn reports_totals_over_every_match() {
        let found = Found {
            documents: vec![document("a", "Northwest Q3 sales closed strong. More text.")],
            matched: Some(12),
            totals: vec![
                Total { field: "revenue".into(), sum: 4_216_000.0, counted: 12 },
                Total { field: "units".into(), sum: 12450.0, counted: 12 },
            ],
            order: Order::Indexed,
        };
        assert_eq!(
            report(&seed(), &found),
            "I found 12 documents about quarterly sales in Northwest from Q3 2024; revenue totals $4.2M and units total 12,450 across all 12 of them."
        );
    }

    #[test]
    fn reports_the_best_match_without_totals() {
        let query = query(json!({"user_query": "forklift damage at the Kent warehouse"}));
        let found = Found {
            documents: vec![
                document("a", "Forklift punctured two pallets of VoltBank batteries at Kent. Claims filed."),
                document("b", "x"),
            ],
            matched: None,
            totals: Vec::new(),
            order: Order::Indexed,
        };
        assert_eq!(
            report(&query, &found),
            "Here are the 2 closest documents about forklift damage at the Kent warehouse; the best match (September 30, 2024): Forklift punctured two pallets of VoltBank batteries at Kent."
        );
        let empty = Found { documents: Vec::new(), matched: Some(0), totals: Vec::new(), order: Order::Indexed };
        assert_eq!(report(&seed(), &empty), "I found no documents about quarterly sales in Northwest from Q3 2024.");
    }

    #[test]
    fn says_when_no_document_has_the_figure() {
        let found = Found {
            documents: vec![document("a", "A note.")],
            matched: Some(1),
            totals: vec![Total { field: "pipeline_value".into(), sum: 0.0, counted: 0 }],
            order: Order::Indexed,
        };
        assert!(
            report(&seed(), &found).ends_with("; none of them has a pipeline value figure."),
            "{}",
            report(&seed(), &found)
        );
    }

    #[test]
    fn formats_amounts_for_speech() {
        assert_eq!(amount("revenue", 4_216_000.0), "$4.2M");
        assert_eq!(amount("revenue", 4_000_000.0), "$4M");
        assert_eq!(amount("deal_value", 1_260_000_000.0), "$1.3B");
        assert_eq!(amount("cost_usd", 48_500.4), "$48,500");
        assert_eq!(amount("freight_cost", -1200.0), "-$1,200");
        assert_eq!(amount("units", 12450.0), "12,450");
        assert_eq!(amount("delay_days", 3.25), "3.2");
        assert_eq!(amount("carrier", 7.0), "7");
        assert!(!is_money("carrier_arrival"));
        assert!(is_money("arr"));
    }

    #[test]
    fn keeps_openings_short() {
        assert_eq!(opening("Short one. Then more."), "Short one. Then more");
        let long = "word ".repeat(60);
        let cut = opening(&long);
        assert!(cut.ends_with('…') && cut.chars().count() <= 161, "{cut}");
    }
}
