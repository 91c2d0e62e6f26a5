//! Dev mode for email (docs/architecture.md, "The Gmail tool"): when the application has a
//! Gmail tool and no real Gmail credentials are configured, `up` serves a local
//! Gmail-compatible server and points the gmail variables at it, so the whole product works on
//! a laptop and nothing leaves it.

use std::path::Path;

use anyhow::Result;
use gatehouse_fake_gmail::{FakeGmail, FakeGmailConfig};

use gatehouse_spin_host::manifest::Manifest;
use gatehouse_spin_host::variables::VariableSources;

/// The variable whose presence marks an application with the Gmail tool, and whose value
/// marks real credentials.
const CREDENTIAL: &str = "gmail_refresh_token";

/// Starts the local server if it is needed; keep the handle alive while serving.
pub(super) async fn start_if_unconfigured(
    manifest_path: &Path,
    variables: &mut VariableSources,
    mail_dir: &Path,
) -> Result<Option<FakeGmail>> {
    let manifest = Manifest::load(manifest_path)?;
    let declared = manifest.variables.get(CREDENTIAL);
    let configured = variables.lookup(CREDENTIAL).or(declared.and_then(|d| d.default.as_ref()));
    if declared.is_none() || configured.is_some_and(|value| !value.trim().is_empty()) {
        return Ok(None);
    }
    let config = FakeGmailConfig { mail_dir: Some(mail_dir.to_path_buf()), ..FakeGmailConfig::default() };
    let credentials = config.credentials.clone();
    let sender = config.sender.clone();
    let fake = FakeGmail::start("127.0.0.1:0".parse()?, config).await?;
    let provided = [
        ("gmail_client_id", credentials.client_id),
        ("gmail_client_secret", credentials.client_secret),
        ("gmail_refresh_token", credentials.refresh_token),
        ("gmail_sender", sender),
        ("gmail_api_base_url", fake.base_url()),
        ("gmail_token_url", fake.token_url()),
        ("gmail_http_host", fake.local_addr().to_string()),
    ];
    for (name, value) in provided {
        variables.provided.insert(name.into(), value);
    }
    eprintln!(
        "dev mode: no Gmail credentials set, so email goes to a local Gmail-compatible server; \
         see what was sent at {}/ (each message is also saved in {})",
        fake.base_url(),
        mail_dir.display()
    );
    Ok(Some(fake))
}
