//! The conformance kit for the tool contract (docs/tools.md, "Checking a tool"): the rules of
//! openapi/tool-contract.yaml, run against any tool over HTTP, each with a verdict and its
//! reason. `gatehouse tools check URL` prints the [`Report`].
//!
//! A tool that keeps its calls itself (any tool written outside this repository) is checked
//! directly: the kit makes up call ids and walks them. A tool that keeps its calls in a
//! Gatehouse database (every tool built on `crates/tool`) refuses a call it was never told of,
//! so the rules about calls are checked through the application it is registered in
//! ([`Kit::through`]): the kit creates real calls there and probes the tool with their ids.
//! Either way `execute` really runs once: check a tool against its test backend.
//!
//! A declared tool's backend is checked too (`gatehouse tools check FILE --backend`,
//! [`backend::run`]): the requests its declaration describes, signed as the declared-tool
//! component signs them, and the same requests unsigned, wrongly signed, replayed and sent to
//! another target, which the backend must refuse (docs/architecture.md, "Declared tools").

pub mod backend;
mod contract;
mod lifecycle;
mod rules;

use std::fmt;
use std::time::Duration;

pub use lifecycle::Lifecycle;
pub use rules::run;

/// What the kit checks, and how.
#[derive(Debug, Clone)]
pub struct Kit {
    /// The contract's base URL, as `tool_registry` would name it.
    pub base_url: String,
    /// The `contract_secret` the tool shares with its callers; without it the signature rules
    /// are skipped (and a tool that requires one refuses everything).
    pub secret: Option<String>,
    /// How long any answer may take; a slower one is cut and fails the rule it was for.
    pub timeout: Duration,
    /// Parameters the tool accepts; without them, the first of its schema's `examples`.
    pub example: Option<serde_json::Map<String, serde_json::Value>>,
    /// The Gatehouse application the tool is registered in, to make real calls through.
    pub through: Option<Lifecycle>,
}

/// One rule of the contract, as the report names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Describe,
    ValidateAccepts,
    ValidateRefuses,
    SummarizeIsDeterministic,
    DiscardLeavesNothing,
    ExecuteNeedsPrepare,
    ExecuteRunsOnce,
    RefusesUnsigned,
    RefusesWrongSignature,
    RefusesReplay,
    AnswersInTime,
    /// A declared tool's backend: its first request, signed as Gatehouse signs it, is accepted.
    AcceptsSigned,
    /// A request signed for one target and sent to another is refused.
    RefusesRetargeted,
    /// The same `execute` under the same `Idempotency-Key` acts once.
    HonoursIdempotencyKey,
    /// What the kit prepared is released by the declaration's `discard`.
    DiscardsPrepared,
}

impl Rule {
    /// The rules of the tool contract, checked against a running tool.
    pub const ALL: [Rule; 11] = [
        Rule::Describe,
        Rule::ValidateAccepts,
        Rule::ValidateRefuses,
        Rule::SummarizeIsDeterministic,
        Rule::DiscardLeavesNothing,
        Rule::ExecuteNeedsPrepare,
        Rule::ExecuteRunsOnce,
        Rule::RefusesUnsigned,
        Rule::RefusesWrongSignature,
        Rule::RefusesReplay,
        Rule::AnswersInTime,
    ];

    /// The rules for a declared tool's backend (docs/tools.md, "What your backend receives"):
    /// the signature rules are the tool contract's own, asked of the backend.
    pub const BACKEND: [Rule; 7] = [
        Rule::AcceptsSigned,
        Rule::RefusesUnsigned,
        Rule::RefusesWrongSignature,
        Rule::RefusesReplay,
        Rule::RefusesRetargeted,
        Rule::HonoursIdempotencyKey,
        Rule::DiscardsPrepared,
    ];

    pub const fn sentence(self) -> &'static str {
        match self {
            Rule::Describe => "describe answers a valid schema and effects",
            Rule::ValidateAccepts => "validate accepts good input",
            Rule::ValidateRefuses => "validate refuses malformed and out-of-schema input with field errors",
            Rule::SummarizeIsDeterministic => "summarize is deterministic",
            Rule::DiscardLeavesNothing => "prepare then discard leaves nothing behind",
            Rule::ExecuteNeedsPrepare => "execute without prepare is refused",
            Rule::ExecuteRunsOnce => "execute twice with the same call runs once",
            Rule::RefusesUnsigned => "an unsigned request is refused",
            Rule::RefusesWrongSignature => "a wrongly signed request is refused",
            Rule::RefusesReplay => "a replayed request is refused",
            Rule::AnswersInTime => "every answer comes within the timeout",
            Rule::AcceptsSigned => "a correctly signed request is accepted",
            Rule::RefusesRetargeted => "a request sent to another target than it was signed for is refused",
            Rule::HonoursIdempotencyKey => "execute twice with the same Idempotency-Key acts once",
            Rule::DiscardsPrepared => "discard releases what the kit prepared",
        }
    }
}

/// How a rule went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// Broken, and why.
    Fail(String),
    /// Not checked, and why (a tool without a checkpoint has no `prepare` to check).
    Skip(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub rule: Rule,
    pub verdict: Verdict,
}

/// Every rule's verdict for one tool.
#[derive(Debug, Clone)]
pub struct Report {
    pub base_url: String,
    /// The tool's name, if it described itself.
    pub tool: Option<String>,
    pub findings: Vec<Finding>,
}

impl Report {
    /// No rule failed.
    pub fn passed(&self) -> bool {
        !self.findings.iter().any(|f| matches!(f.verdict, Verdict::Fail(_)))
    }
}

impl fmt::Display for Report {
    /// A table: one line per rule, `pass`, `FAIL` or `skip`, and the reason.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = self.tool.as_deref().unwrap_or("(no description)");
        writeln!(f, "{name} at {}", self.base_url)?;
        let width = self.findings.iter().map(|finding| finding.rule.sentence().len()).max().unwrap_or(0);
        for finding in &self.findings {
            let (mark, reason) = match &finding.verdict {
                Verdict::Pass => ("pass", ""),
                Verdict::Fail(reason) => ("FAIL", reason.as_str()),
                Verdict::Skip(reason) => ("skip", reason.as_str()),
            };
            writeln!(f, "  {:width$}  {mark}  {reason}", finding.rule.sentence())?;
        }
        let failed = self.findings.iter().filter(|f| matches!(f.verdict, Verdict::Fail(_))).count();
        write!(f, "{} rules, {failed} failed", self.findings.len())
    }
}

/// Why the kit could not check a tool at all.
#[derive(Debug, thiserror::Error)]
pub enum KitError {
    #[error("{0} is not an http(s) URL")]
    NotAUrl(String),
    #[error("building the HTTP client: {0}")]
    Client(String),
    /// A declared tool's backend could not be named: its origin variable is not set, or not an
    /// origin.
    #[error("the backend's origin: {0}")]
    Origin(String),
}
