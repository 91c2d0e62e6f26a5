//! SQL text as it appears in messages, and what a statement's text tells the host that runs it.

/// A statement that begins with this line is planned for its own values each time it runs.
///
/// The runner prepares a statement once per pooled connection and reuses it, which saves a
/// round trip; after five runs PostgreSQL may then switch the statement to one generic plan,
/// chosen without the values. That is right for the lifecycle's statements and wrong for one
/// whose best plan depends on its values: a search whose partial index is picked by a filter's
/// value, planned generically, sorted 33,000 matches exactly in 740 ms instead of reading its
/// index in 170 (docs/architecture.md, "Vector search"). Spin prepares every statement afresh,
/// so there the line changes nothing.
pub const PLANNED_EACH_TIME: &str = "-- planned each time\n";

/// Whether `statement` asks to be planned for its values each time ([`PLANNED_EACH_TIME`]).
pub fn planned_each_time(statement: &str) -> bool {
    statement.starts_with(PLANNED_EACH_TIME)
}

/// The statement without its comment lines and with its whitespace collapsed, cut after
/// `max_chars` characters (on a character boundary, with `...`): short enough for an error
/// message, and recognisable.
pub fn statement_excerpt(statement: &str, max_chars: usize) -> String {
    let text = statement
        .lines()
        .filter(|line| !line.trim_start().starts_with("--"))
        .flat_map(str::split_whitespace)
        .collect::<Vec<_>>()
        .join(" ");
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_statement_that_begins_with_the_line_is_planned_each_time() {
        assert!(planned_each_time(&format!("{PLANNED_EACH_TIME}SELECT 1")));
        assert!(!planned_each_time("SELECT 1 -- planned each time"));
        assert!(!planned_each_time("SELECT 1"));
        assert_eq!(statement_excerpt(&format!("{PLANNED_EACH_TIME}SELECT 1"), 50), "SELECT 1");
    }

    #[test]
    fn comments_go_whitespace_folds_and_long_text_is_cut_between_characters() {
        assert_eq!(statement_excerpt("-- why\nSELECT  1\n  FROM t", 50), "SELECT 1 FROM t");
        let cut = statement_excerpt(&format!("SELECT '{}'", "é".repeat(400)), 160);
        assert_eq!(cut.chars().count(), 163);
        assert!(cut.starts_with("SELECT 'é") && cut.ends_with("..."));
    }
}
