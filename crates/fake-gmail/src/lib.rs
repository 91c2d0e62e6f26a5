//! A fake Gmail: the parts of the Gmail REST API (v1) and of Google's OAuth2 token endpoint that
//! Gatehouse's `gmail` component uses, spoken over real HTTP with Google's shapes, status codes
//! and error bodies. The component is pointed at it through its base-URL variables and cannot
//! tell it from the real service; tests inspect and steer it through this library or through the
//! token-free `/_fake/` routes.
mod config;
mod control;
mod dev_view;
mod faults;
mod gmail;
mod google_error;
mod headers;
mod mailbox;
mod message_format;
mod oauth;
mod records;
mod responses;
mod routes;
mod scopes;
mod search;
mod server;
mod state;
mod tokens;

use std::net::SocketAddr;
use std::sync::Arc;

pub use config::{Credentials, DEFAULT_SCOPES, FakeGmailConfig};
pub use faults::{Fault, OPERATIONS};
pub use mailbox::{StoredDraft, StoredMessage};
pub use records::RequestRecord;

use state::Shared;

/// A running fake Gmail server. It stops when dropped or when [`FakeGmail::shutdown`] is awaited.
pub struct FakeGmail {
    address: SocketAddr,
    shared: Arc<Shared>,
    server: Option<gatehouse_http_listener::Serving>,
}

impl FakeGmail {
    /// Binds `listen` (port 0 picks a free port) and serves until dropped.
    pub async fn start(listen: SocketAddr, config: FakeGmailConfig) -> anyhow::Result<FakeGmail> {
        if let Some(dir) = &config.mail_dir {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("cannot create the mail directory {}: {e}", dir.display()))?;
        }
        let shared = Arc::new(Shared::new(config));
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {listen}: {e}"))?;
        let address = listener.local_addr()?;
        let server = server::spawn(listener, shared.clone());
        Ok(FakeGmail { address, shared, server: Some(server) })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// What the `gmail_api_base_url` variable should be set to; Gmail paths hang under it.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// What the `gmail_token_url` variable should be set to.
    pub fn token_url(&self) -> String {
        format!("http://{}/token", self.address)
    }

    /// Messages labelled SENT, oldest first.
    pub fn sent(&self) -> Vec<StoredMessage> {
        self.shared.lock().mailbox.sent()
    }

    pub fn drafts(&self) -> Vec<StoredDraft> {
        self.shared.lock().mailbox.drafts()
    }

    /// Every request answered so far, in arrival order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.lock().requests.clone()
    }

    /// Arms a fault; faults for the same operation are used in the order they were armed.
    pub fn inject(&self, fault: Fault) {
        self.shared.lock().faults.arm(fault);
    }

    /// Every access token issued so far becomes invalid; the next use answers 401.
    pub fn expire_tokens(&self) {
        self.shared.lock().tokens.expire_all();
    }

    /// Forgets mail, drafts, armed faults and the request log. Issued access tokens stay valid,
    /// as they would across a mailbox being emptied; [`FakeGmail::expire_tokens`] ends them.
    pub fn reset(&self) {
        self.shared.lock().reset();
    }

    /// Stops accepting, lets requests in flight finish, and waits for the listener to close.
    pub async fn shutdown(mut self) {
        if let Some(server) = self.server.take() {
            server.stop().await;
        }
    }
}

impl Drop for FakeGmail {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.signal_stop();
        }
    }
}
