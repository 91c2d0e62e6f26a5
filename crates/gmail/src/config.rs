//! The Gmail settings, from Spin variables. The three secrets never appear in a log, an
//! error or a response, which is why this type has no `Debug`.

use gatehouse_tool::ToolFailure;
use spin_sdk::variables;

use crate::address::Address;

pub struct GmailConfig {
    pub client_id: String,
    pub client_secret: String,
    pub refresh_token: String,
    pub sender: Address,
    pub api_base_url: String,
    pub token_url: String,
}

fn read(name: &str) -> Result<String, ToolFailure> {
    variables::get(name).map(|value| value.trim().to_owned()).map_err(|e| {
        gatehouse_platform::log_line("error", &format!("reading the {name} variable: {e:?}"));
        ToolFailure::new("Email isn't set up on this server yet, so I couldn't send it.")
    })
}

fn required(name: &str) -> Result<String, ToolFailure> {
    let value = read(name)?;
    if value.is_empty() {
        gatehouse_platform::log_line("error", &format!("the {name} variable is empty"));
        return Err(ToolFailure::new("Email isn't set up on this server yet, so I couldn't send it."));
    }
    Ok(value)
}

impl GmailConfig {
    pub fn load() -> Result<GmailConfig, ToolFailure> {
        let sender = required("gmail_sender")?;
        let sender = Address::parse(&sender).map_err(|e| {
            gatehouse_platform::log_line("error", &format!("the gmail_sender variable: {e}"));
            ToolFailure::new("Email isn't set up correctly on this server, so I couldn't send it.")
        })?;
        Ok(GmailConfig {
            client_id: required("gmail_client_id")?,
            client_secret: required("gmail_client_secret")?,
            refresh_token: required("gmail_refresh_token")?,
            sender,
            api_base_url: required("gmail_api_base_url")?.trim_end_matches('/').to_owned(),
            token_url: required("gmail_token_url")?,
        })
    }
}
