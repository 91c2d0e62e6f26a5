//! Where a declared tool's backend is: written in the declaration, or held by a Spin variable.

/// The backend's origin (scheme, host and port; no path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `https://reservations.example.com`, as written.
    Literal(String),
    /// `{{ vars.reservations_url }}`: the Spin variable that holds it, read when a call needs it.
    Variable(String),
}

impl Origin {
    /// `backend.url` as the declaration writes it.
    pub fn parse(url: &str) -> Result<Origin, String> {
        let trimmed = url.trim();
        if let Some(inner) = trimmed.strip_prefix("{{").and_then(|rest| rest.strip_suffix("}}")) {
            let name = inner.trim().strip_prefix("vars.").unwrap_or_default();
            return if crate::check::is_variable_name(name) {
                Ok(Origin::Variable(name.to_owned()))
            } else {
                Err("a template here is exactly one Spin variable, as \"{{ vars.backend_url }}\"".to_owned())
            };
        }
        Origin::literal(trimmed).map(Origin::Literal)
    }

    /// An origin's text, checked: `http` or `https`, a host, an optional port, nothing else.
    /// Also how a variable's value is checked when it is read.
    pub fn literal(url: &str) -> Result<String, String> {
        let url = url.trim().trim_end_matches('/');
        let (scheme, rest) = url.split_once("://").ok_or("must be an origin such as https://api.example.com")?;
        if !matches!(scheme, "http" | "https") {
            return Err(format!("the scheme must be http or https, not {scheme:?}"));
        }
        if rest.is_empty() || rest.contains(['/', '?', '#', '@', ' ', '{', '}']) {
            return Err("must be only a scheme, a host and an optional port (the path goes in each step)".to_owned());
        }
        // After an IPv6 literal's `]`, or anywhere in a name, a `:` starts the port.
        let after_host = rest.rsplit_once(']').map_or(rest, |(_, after)| after);
        if let Some((_, port)) = after_host.rsplit_once(':')
            && port.parse::<u16>().is_err()
        {
            return Err(format!("{port:?} is not a port"));
        }
        Ok(format!("{scheme}://{rest}"))
    }

    /// What the component's `allowed_outbound_hosts` names: the origin, or the Spin template
    /// of the variable that holds it.
    pub fn allowed_outbound_host(&self) -> String {
        match self {
            Origin::Literal(origin) => origin.clone(),
            Origin::Variable(name) => format!("{{{{ {name} }}}}"),
        }
    }
}
