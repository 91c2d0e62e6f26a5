//! SQL text as it appears in messages.

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
    fn comments_go_whitespace_folds_and_long_text_is_cut_between_characters() {
        assert_eq!(statement_excerpt("-- why\nSELECT  1\n  FROM t", 50), "SELECT 1 FROM t");
        let cut = statement_excerpt(&format!("SELECT '{}'", "é".repeat(400)), 160);
        assert_eq!(cut.chars().count(), 163);
        assert!(cut.starts_with("SELECT 'é") && cut.ends_with("..."));
    }
}
