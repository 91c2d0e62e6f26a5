//! The `format` parameter of `messages.get` and `drafts.get`: how much of a message an answer
//! carries. Shared by the handlers and the scope check (the metadata-only scopes refuse the
//! formats that include a body).

/// How much of a message an answer carries.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Minimal,
    Full,
    Raw,
    Metadata,
}

/// A `format` value Gmail does not know, lower-cased as it was compared.
pub(crate) struct UnknownFormat(pub String);

impl Format {
    /// The format a request's `format` parameter names, in any case; `Full` when it has none.
    pub fn parse(parameter: Option<&str>) -> Result<Format, UnknownFormat> {
        match parameter.map(str::to_ascii_lowercase).as_deref() {
            None | Some("full") => Ok(Format::Full),
            Some("minimal") => Ok(Format::Minimal),
            Some("raw") => Ok(Format::Raw),
            Some("metadata") => Ok(Format::Metadata),
            Some(other) => Err(UnknownFormat(other.to_owned())),
        }
    }
}
