//! `GET /voice-tools/tools`: every registered tool, as it describes itself.

use gatehouse_domain::ApiError;
use gatehouse_http::Reply;
use serde_json::{Value, json};

use crate::Config;

pub async fn list_tools() -> Result<Reply, ApiError> {
    let registry = Config::registry()?;
    let mut tools = Vec::new();
    for entry in registry.entries() {
        let tool = Config::tool(&entry.component)?;
        let described = match tool.describe().await {
            Ok(description) => {
                let mut value = serde_json::to_value(&description).unwrap_or(Value::Null);
                value["component"] = json!(entry.component);
                value["available"] = json!(true);
                value
            }
            // One tool being down must not hide the others.
            Err(e) => {
                gatehouse_http::log_line("warn", &format!("describing {}: {e}", entry.component));
                json!({"name": entry.name, "aliases": entry.aliases, "component": entry.component, "available": false})
            }
        };
        tools.push(described);
    }
    Ok(gatehouse_http::json_response(200, &json!({"tools": tools})).into())
}
