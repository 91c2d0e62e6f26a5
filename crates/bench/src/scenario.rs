//! What the benchmark can measure, and the statements pgbench runs for each scenario's floor.
use anyhow::{Result, bail};

/// What a benchmark can measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scenario {
    Health,
    /// GET /voice-tools/context/:session of a session with 25 open and 20 settled calls.
    Context,
    /// The same route on a session with thousands of open and settled calls: the answer is
    /// bounded, so its size and time should match `context`.
    ContextLarge,
    /// POST /voice-tools/pending.
    Create,
    /// PATCH /voice-tools/modify/:id on PENDING calls, each request changing `to`.
    Modify,
    /// DELETE /voice-tools/cancel/:id, a fresh PENDING call per request.
    Cancel,
    /// GET /voice-tools/status/:id.
    Status,
    /// create → modify → confirm → checkpoint → resume proceed → COMPLETED, with a relay.
    Flow,
    /// query_vector_db: create, then confirm with `Prefer: wait` until COMPLETED.
    Query,
    /// The embedding model alone on the ingested documents, against the machine's matrix rate.
    Embed,
    /// `gatehouse embeddings serve` in this process: documents a second at each concurrency
    /// level, one a request, beside the model embedding them here.
    EmbedServe,
    /// The vector search's recall@10 through its nearest-neighbour index against an exact search, with
    /// filters, over the ingested documents.
    Recall,
    /// GET /voice-tools/calls: the first page of the first tenant's calls, newest first.
    Calls,
    /// GET /voice-tools/tools/fixture_action/stats: the fixture tool's last day.
    Stats,
    /// GET /voice-tools/tools/fixture_action/executions: the first page of its history.
    Executions,
}

impl Scenario {
    pub(crate) const ALL: [Scenario; 15] = [
        Scenario::Health,
        Scenario::Context,
        Scenario::ContextLarge,
        Scenario::Create,
        Scenario::Modify,
        Scenario::Cancel,
        Scenario::Status,
        Scenario::Flow,
        Scenario::Query,
        Scenario::Embed,
        Scenario::EmbedServe,
        Scenario::Recall,
        Scenario::Calls,
        Scenario::Stats,
        Scenario::Executions,
    ];

    pub(crate) fn parse(name: &str) -> Result<Scenario> {
        match Scenario::ALL.into_iter().find(|s| s.name() == name.trim()) {
            Some(scenario) => Ok(scenario),
            None => {
                let known: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
                bail!("unknown scenario {name:?}: expected one of {}", known.join(", "))
            }
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Scenario::Health => "health",
            Scenario::Context => "context",
            Scenario::ContextLarge => "context-large",
            Scenario::Create => "create",
            Scenario::Modify => "modify",
            Scenario::Cancel => "cancel",
            Scenario::Status => "status",
            Scenario::Flow => "flow",
            Scenario::Query => "query",
            Scenario::Embed => "embed",
            Scenario::EmbedServe => "embed-serve",
            Scenario::Recall => "recall",
            Scenario::Calls => "calls",
            Scenario::Stats => "stats",
            Scenario::Executions => "executions",
        }
    }

    pub(crate) fn is_lifecycle(self) -> bool {
        !matches!(
            self,
            Scenario::Health
                | Scenario::Context
                | Scenario::ContextLarge
                | Scenario::Query
                | Scenario::Embed
                | Scenario::EmbedServe
                | Scenario::Recall
                | Scenario::Calls
                | Scenario::Stats
                | Scenario::Executions
        )
    }

    /// Measured over HTTP at each concurrency level against the application; `embed`,
    /// `embed-serve` and `recall` run the model in this process.
    pub(crate) fn is_http(self) -> bool {
        !self.needs_model()
    }

    /// Runs the embedding model in this process.
    pub(crate) fn needs_model(self) -> bool {
        matches!(self, Scenario::Embed | Scenario::EmbedServe | Scenario::Recall)
    }

    /// The steps of a multi-step unit of work, timed one by one.
    pub(crate) fn steps(self) -> &'static [&'static str] {
        match self {
            Scenario::Flow => &FLOW_STEPS,
            Scenario::Query => &QUERY_STEPS,
            _ => &[],
        }
    }

    /// The statements pgbench runs for this scenario's floor.
    pub(crate) fn floor(self) -> &'static [Statement] {
        match self {
            Scenario::Health => &[Statement::Health],
            Scenario::Context => &[Statement::Context],
            Scenario::ContextLarge => &[Statement::ContextLarge],
            Scenario::Create => &[Statement::Insert],
            Scenario::Modify => &[Statement::Modify],
            Scenario::Cancel => &[Statement::Cancel],
            Scenario::Status => &[Statement::Get],
            // A conversation's commits are measured against the cost of one insert.
            Scenario::Flow => &[Statement::Insert, Statement::Confirm],
            // A query commits a create and a confirm like any call; the search itself is a read.
            Scenario::Query => &[Statement::Insert, Statement::Confirm],
            // Measured against the machine's matrix rate, and against an exact search, instead.
            Scenario::Embed | Scenario::EmbedServe | Scenario::Recall => &[],
            Scenario::Calls => &[Statement::Calls],
            Scenario::Stats => &[Statement::Stats],
            Scenario::Executions => &[Statement::Executions],
        }
    }
}

/// The steps of a conversation (`flow`), in order.
pub(crate) const FLOW_STEPS: [&str; 4] = ["create", "modify", "confirm", "resume"];

/// The steps of one query (`query`), in order.
pub(crate) const QUERY_STEPS: [&str; 2] = ["create", "confirm"];

/// A statement a route sends, run by pgbench for the floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Statement {
    Health,
    Context,
    ContextLarge,
    Insert,
    Modify,
    Cancel,
    Confirm,
    Get,
    Calls,
    Stats,
    Executions,
}

impl Statement {
    /// In the order they run: the insert first, since its rate sizes the transitions' rows.
    pub(crate) const ALL: [Statement; 11] = [
        Statement::Health,
        Statement::Context,
        Statement::ContextLarge,
        Statement::Insert,
        Statement::Modify,
        Statement::Cancel,
        Statement::Confirm,
        Statement::Get,
        Statement::Calls,
        Statement::Stats,
        Statement::Executions,
    ];

    /// Named after the route that sends it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Statement::Health => "health",
            Statement::Context => "context",
            Statement::ContextLarge => "context-large",
            Statement::Insert => "create",
            Statement::Modify => "modify",
            Statement::Cancel => "cancel",
            Statement::Confirm => "confirm",
            Statement::Get => "status",
            Statement::Calls => "calls",
            Statement::Stats => "stats",
            Statement::Executions => "executions",
        }
    }

    /// Whether the statement reads rows that are there already (seeded or not), so it needs
    /// no set-up of the lifecycle scenarios.
    pub(crate) fn reads_only(self) -> bool {
        matches!(
            self,
            Statement::Health
                | Statement::Context
                | Statement::ContextLarge
                | Statement::Calls
                | Statement::Stats
                | Statement::Executions
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_parse_by_name() {
        for scenario in Scenario::ALL {
            assert_eq!(Scenario::parse(scenario.name()).unwrap(), scenario);
        }
        assert!(Scenario::parse("confirm").is_err());
    }

    #[test]
    fn every_http_scenario_has_a_floor() {
        for scenario in Scenario::ALL {
            assert_eq!(scenario.floor().is_empty(), !scenario.is_http(), "{scenario:?}");
            assert!(scenario.floor().iter().all(|st| Statement::ALL.contains(st)));
        }
    }
}
