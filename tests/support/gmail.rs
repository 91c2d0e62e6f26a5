//! The application with its real `gmail` component, pointed at a fake Gmail server that speaks
//! the Gmail REST API and Google's token endpoint over real HTTP.

use anyhow::Result;
use gatehouse_fake_gmail::{FakeGmail, FakeGmailConfig};

use crate::RunnerOptions;
use crate::lifecycle::{App, lifecycle_options};

pub const SENDER: &str = "gatehouse@example.com";
pub const GMAIL_REGISTRY: &str = "send_email|send_gmail=gmail";

/// A runner serving the application, and the fake Gmail it sends through.
pub struct GmailApp {
    pub app: App,
    pub fake: FakeGmail,
}

/// Runner options for the application sending through `fake`; `extra` variables override the
/// defaults and `args` go to `gatehouse up`.
pub fn gmail_options(fake: &FakeGmail, extra: &[(&str, &str)], args: &[&str]) -> RunnerOptions {
    let owned = gmail_variables(fake);
    let mut variables: Vec<(&str, &str)> = owned.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    variables.extend_from_slice(extra);
    lifecycle_options(&variables, args)
}

/// The variables that point the `gmail` component at `fake`.
pub fn gmail_variables(fake: &FakeGmail) -> Vec<(String, String)> {
    let credentials = FakeGmailConfig::default().credentials;
    vec![
        ("tool_registry".into(), GMAIL_REGISTRY.into()),
        ("gmail_client_id".into(), credentials.client_id),
        ("gmail_client_secret".into(), credentials.client_secret),
        ("gmail_refresh_token".into(), credentials.refresh_token),
        ("gmail_sender".into(), SENDER.into()),
        ("gmail_api_base_url".into(), fake.base_url()),
        ("gmail_token_url".into(), fake.token_url()),
        ("gmail_http_host".into(), fake.local_addr().to_string()),
    ]
}

pub async fn start_fake() -> Result<FakeGmail> {
    FakeGmail::start("127.0.0.1:0".parse()?, FakeGmailConfig { sender: SENDER.into(), ..FakeGmailConfig::default() })
        .await
}

impl GmailApp {
    /// `extra` variables override the defaults; `args` go to `gatehouse up`.
    pub async fn start(extra: &[(&str, &str)], args: &[&str]) -> Result<GmailApp> {
        let fake = start_fake().await?;
        let app = App::start(gmail_options(&fake, extra, args)).await?;
        Ok(GmailApp { app, fake })
    }
}
