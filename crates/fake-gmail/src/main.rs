//! `fake-gmail`: serves the fake Gmail API and token endpoint until interrupted.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use gatehouse_fake_gmail::{Credentials, DEFAULT_SCOPES, FakeGmail, FakeGmailConfig};

#[derive(Parser)]
#[command(about = "A fake Gmail API and OAuth2 token endpoint for tests and local runs")]
struct Args {
    #[arg(long, default_value = "127.0.0.1:4010")]
    listen: SocketAddr,
    /// Also write each sent message there as <message id>.eml.
    #[arg(long)]
    mail_dir: Option<PathBuf>,
    #[arg(long, default_value_t = 3600)]
    token_ttl_seconds: u64,
    #[arg(long, default_value = "fake-client-id")]
    client_id: String,
    #[arg(long, env = "FAKE_GMAIL_CLIENT_SECRET", default_value = "fake-client-secret", hide_env_values = true)]
    client_secret: String,
    #[arg(long, env = "FAKE_GMAIL_REFRESH_TOKEN", default_value = "fake-refresh-token", hide_env_values = true)]
    refresh_token: String,
    /// The mailbox's address.
    #[arg(long, default_value = "gatehouse@example.com")]
    sender: String,
    /// The scopes the refresh token was granted, space-separated.
    #[arg(long, default_value_t = DEFAULT_SCOPES.join(" "))]
    scopes: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = FakeGmailConfig {
        credentials: Credentials {
            client_id: args.client_id,
            client_secret: args.client_secret,
            refresh_token: args.refresh_token,
        },
        sender: args.sender,
        token_ttl: Duration::from_secs(args.token_ttl_seconds),
        mail_dir: args.mail_dir.clone(),
        scopes: args.scopes.split_whitespace().map(str::to_owned).collect(),
    };
    let fake = FakeGmail::start(args.listen, config).await?;
    println!("Fake Gmail ready on {}", fake.base_url());
    println!("  gmail_api_base_url = {}", fake.base_url());
    println!("  gmail_token_url    = {}", fake.token_url());
    println!("  sent mail:           {}/", fake.base_url());
    if let Some(dir) = &args.mail_dir {
        println!("  sent mail files:     {}", dir.display());
    }
    wait_for_stop_signal().await?;
    fake.shutdown().await;
    Ok(())
}

async fn wait_for_stop_signal() -> anyhow::Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        interrupted = tokio::signal::ctrl_c() => interrupted?,
        _ = terminate.recv() => {}
    }
    Ok(())
}
