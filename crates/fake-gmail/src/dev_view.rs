//! `GET /`: a page listing the mail the fake "sent", newest first, each linked to its raw form.
use std::fmt::Write;

use hyper::StatusCode;

use crate::headers::decode_encoded_words;
use crate::mailbox::StoredMessage;
use crate::responses::{self, Answer};
use crate::state::Shared;

pub(crate) fn page(shared: &Shared) -> Answer {
    let (sent, draft_count) = {
        let state = shared.lock();
        (state.mailbox.sent(), state.mailbox.drafts().len())
    };
    let mut html = String::from(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Fake Gmail: sent mail</title>\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}\
         td,th{border-bottom:1px solid #ddd;padding:.4em .8em;text-align:left;vertical-align:top}</style>\
         </head><body>\n",
    );
    let _ = writeln!(
        html,
        "<h1>Sent by {}</h1>\n<p>{} sent, {} draft(s) waiting. Nothing here left this machine.</p>",
        escape(&shared.config.sender),
        sent.len(),
        draft_count
    );
    if sent.is_empty() {
        html.push_str("<p>No mail sent yet.</p>\n");
    } else {
        html.push_str("<table>\n<tr><th>Date</th><th>From</th><th>To</th><th>Subject</th><th></th></tr>\n");
        for message in sent.iter().rev() {
            html.push_str(&row(message));
        }
        html.push_str("</table>\n");
    }
    html.push_str("</body></html>\n");
    responses::with_type(StatusCode::OK, "text/html; charset=utf-8", html)
}

fn row(message: &StoredMessage) -> String {
    let headers = message.headers();
    let shown = |name: &str| escape(&decode_encoded_words(headers.get(name).unwrap_or("")));
    let to = [headers.get("To"), headers.get("Cc")].into_iter().flatten().collect::<Vec<_>>().join(", ");
    format!(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><a href=\"/_fake/messages/{}.eml\">raw</a></td></tr>\n",
        shown("Date"),
        shown("From"),
        escape(&decode_encoded_words(&to)),
        shown("Subject"),
        escape(&message.id)
    )
}

fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
