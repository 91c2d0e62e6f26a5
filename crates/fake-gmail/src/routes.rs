//! Which operation a method and path name.
use bytes::Bytes;
use hyper::{HeaderMap, Method};
use percent_encoding::percent_decode_str;

/// A request read in full.
pub(crate) struct Incoming {
    pub query: Vec<(String, String)>,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Incoming {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    pub fn content_type(&self) -> Option<String> {
        self.header("content-type").map(|value| value.trim().to_ascii_lowercase())
    }

    /// The last value of a query parameter, as Google's parser keeps it.
    pub fn query_param(&self, name: &str) -> Option<&str> {
        self.query.iter().rev().find(|(key, _)| key == name).map(|(_, value)| value.as_str())
    }

    /// Every value of a repeated query parameter; `labelIds` may also come as `labelIds[]`.
    pub fn query_params(&self, name: &str) -> Vec<&str> {
        self.query
            .iter()
            .filter(|(key, _)| key == name || key.strip_suffix("[]") == Some(name))
            .map(|(_, value)| value.as_str())
            .collect()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GmailCall {
    DraftsCreate,
    DraftsList,
    DraftsGet(String),
    DraftsSend,
    DraftsDelete(String),
    MessagesSend,
    MessagesList,
    MessagesGet(String),
}

impl GmailCall {
    pub fn operation(&self) -> &'static str {
        match self {
            GmailCall::DraftsCreate => "drafts.create",
            GmailCall::DraftsList => "drafts.list",
            GmailCall::DraftsGet(_) => "drafts.get",
            GmailCall::DraftsSend => "drafts.send",
            GmailCall::DraftsDelete(_) => "drafts.delete",
            GmailCall::MessagesSend => "messages.send",
            GmailCall::MessagesList => "messages.list",
            GmailCall::MessagesGet(_) => "messages.get",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ControlCall {
    Messages,
    Drafts,
    Requests,
    Faults,
    ArmFault,
    ExpireTokens,
    Reset,
    /// A stored message as `message/rfc822`, for the dev view's links.
    Eml(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Token,
    Gmail { user_id: String, call: GmailCall },
    Control(ControlCall),
    DevView,
    Unknown,
}

impl Route {
    pub fn operation(&self) -> String {
        match self {
            Route::Token => "token".into(),
            Route::Gmail { call, .. } => call.operation().into(),
            Route::Control(call) => format!("_fake.{}", control_name(call)),
            Route::DevView => "dev_view".into(),
            Route::Unknown => "unknown".into(),
        }
    }

    /// Faults only touch the emulated protocol, never the routes that steer the fake.
    pub fn takes_faults(&self) -> bool {
        matches!(self, Route::Token | Route::Gmail { .. })
    }
}

fn control_name(call: &ControlCall) -> &'static str {
    match call {
        ControlCall::Messages => "messages",
        ControlCall::Drafts => "drafts",
        ControlCall::Requests => "requests",
        ControlCall::Faults => "faults",
        ControlCall::ArmFault => "faults.arm",
        ControlCall::ExpireTokens => "expire-tokens",
        ControlCall::Reset => "reset",
        ControlCall::Eml(_) => "eml",
    }
}

pub(crate) fn resolve(method: &Method, path: &str) -> Route {
    let segments: Vec<String> = path
        .trim_matches('/')
        .split('/')
        .map(|segment| percent_decode_str(segment).decode_utf8_lossy().into_owned())
        .collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    match (method, segments.as_slice()) {
        (&Method::GET, [""]) => Route::DevView,
        (&Method::POST, ["token"]) => Route::Token,
        (_, ["gmail", "v1", "users", user_id, rest @ ..]) => match gmail_call(method, rest) {
            Some(call) => Route::Gmail { user_id: (*user_id).to_owned(), call },
            None => Route::Unknown,
        },
        (_, ["_fake", rest @ ..]) => control_call(method, rest).map_or(Route::Unknown, Route::Control),
        _ => Route::Unknown,
    }
}

fn gmail_call(method: &Method, rest: &[&str]) -> Option<GmailCall> {
    Some(match (method, rest) {
        (&Method::POST, ["drafts"]) => GmailCall::DraftsCreate,
        (&Method::GET, ["drafts"]) => GmailCall::DraftsList,
        (&Method::POST, ["drafts", "send"]) => GmailCall::DraftsSend,
        (&Method::GET, ["drafts", id]) => GmailCall::DraftsGet((*id).to_owned()),
        (&Method::DELETE, ["drafts", id]) => GmailCall::DraftsDelete((*id).to_owned()),
        (&Method::POST, ["messages", "send"]) => GmailCall::MessagesSend,
        (&Method::GET, ["messages"]) => GmailCall::MessagesList,
        (&Method::GET, ["messages", id]) => GmailCall::MessagesGet((*id).to_owned()),
        _ => return None,
    })
}

fn control_call(method: &Method, rest: &[&str]) -> Option<ControlCall> {
    Some(match (method, rest) {
        (&Method::GET, ["messages"]) => ControlCall::Messages,
        (&Method::GET, ["messages", file]) => ControlCall::Eml(file.strip_suffix(".eml")?.to_owned()),
        (&Method::GET, ["drafts"]) => ControlCall::Drafts,
        (&Method::GET, ["requests"]) => ControlCall::Requests,
        (&Method::GET, ["faults"]) => ControlCall::Faults,
        (&Method::POST, ["faults"]) => ControlCall::ArmFault,
        (&Method::POST, ["expire-tokens"]) => ControlCall::ExpireTokens,
        (&Method::POST, ["reset"]) => ControlCall::Reset,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_gmail_operations_and_decodes_the_user() {
        assert_eq!(
            resolve(&Method::POST, "/gmail/v1/users/gatehouse%40example.com/drafts/send"),
            Route::Gmail { user_id: "gatehouse@example.com".into(), call: GmailCall::DraftsSend }
        );
        assert_eq!(resolve(&Method::GET, "/gmail/v1/users/me/messages/18c0ffee00000001").operation(), "messages.get");
        assert_eq!(resolve(&Method::PUT, "/gmail/v1/users/me/drafts/r1"), Route::Unknown);
        assert_eq!(resolve(&Method::GET, "/token"), Route::Unknown);
        assert_eq!(resolve(&Method::GET, "/_fake/messages/abc.eml"), Route::Control(ControlCall::Eml("abc".into())));
        assert_eq!(resolve(&Method::GET, "/_fake/messages/abc"), Route::Unknown);
    }
}
