//! The rules, in the order the report lists them. Each one sends what its sentence says and
//! judges the answers by openapi/tool-contract.yaml: 200 success, 422 the tool's "no", 409 an
//! operation out of order, 401 a request that is not validly signed, once.

use gatehouse_domain::contract::{
    ContractAnswer, Discarded, Executed, Operation, Prepared, Summary, ToolDescription, Validated, declared_checkpoint,
    read_answer,
};
use serde_json::{Map, Value, json};

use crate::contract::{Answer, Contract, Signing, new_call_id, on_call};
use crate::lifecycle::Calls;
use crate::{Finding, Kit, KitError, Report, Rule, Verdict};

/// What a tool answers for a call it was never told of when it keeps its calls in Gatehouse's
/// database (openapi/tool-contract.yaml, `NoSuchCall`).
const UNKNOWN_CALL: u16 = 404;

/// Runs every rule against the tool `kit` names.
pub async fn run(kit: &Kit) -> Result<Report, KitError> {
    let contract = Contract::new(kit)?;
    let mut findings = Vec::new();
    let mut judge = |rule: Rule, verdict: Result<Verdict, String>| {
        findings.push(Finding { rule, verdict: verdict.unwrap_or_else(Verdict::Fail) });
    };

    let described = describe(&contract, kit).await;
    let (description, example) = match described {
        Ok(found) => found,
        Err(reason) => {
            judge(Rule::Describe, Err(reason));
            for rule in Rule::ALL.into_iter().skip(1).filter(|rule| *rule != Rule::AnswersInTime) {
                judge(rule, Ok(Verdict::Skip("the tool did not describe itself".to_owned())));
            }
            judge(Rule::AnswersInTime, Ok(in_time(&contract)));
            return Ok(Report { base_url: kit.base_url.clone(), tool: None, findings });
        }
    };
    judge(Rule::Describe, Ok(Verdict::Pass));

    let accepted = validate_accepts(&contract, &description, &example).await;
    let normalized = accepted.as_ref().map(|v| v.parameters.clone()).unwrap_or_else(|_| example.clone());
    judge(Rule::ValidateAccepts, accepted.as_ref().map(|_| Verdict::Pass).map_err(Clone::clone));
    judge(Rule::ValidateRefuses, validate_refuses(&contract, &description, &example).await);
    judge(Rule::SummarizeIsDeterministic, summarize(&contract, &normalized, accepted.ok().as_ref()).await);

    let parameters = Value::Object(normalized.clone());
    let needs_checkpoint = description.needs_checkpoint;
    match &kit.through {
        None => {
            judge(
                Rule::DiscardLeavesNothing,
                checkpointed(needs_checkpoint, discard_directly(&contract, &parameters)).await,
            );
            judge(
                Rule::ExecuteNeedsPrepare,
                checkpointed(needs_checkpoint, execute_unprepared_directly(&contract, &parameters)).await,
            );
            judge(Rule::ExecuteRunsOnce, execute_twice_directly(&contract, &description, &parameters).await);
        }
        Some(lifecycle) => {
            let calls = Calls::new(lifecycle, &description.name);
            judge(
                Rule::DiscardLeavesNothing,
                checkpointed(needs_checkpoint, discard_through(&contract, &calls, &normalized)).await,
            );
            judge(
                Rule::ExecuteNeedsPrepare,
                checkpointed(needs_checkpoint, execute_unprepared_through(&contract, &calls, &normalized)).await,
            );
            judge(Rule::ExecuteRunsOnce, execute_twice_through(&contract, &calls, &description, &normalized).await);
        }
    }

    let good = json!({"parameters": parameters});
    judge(Rule::RefusesUnsigned, refused_when(&contract, &good, Signing::Unsigned, "an unsigned").await);
    judge(Rule::RefusesWrongSignature, refused_when(&contract, &good, Signing::WrongKey, "a wrongly signed").await);
    judge(Rule::RefusesReplay, replay(&contract, &good).await);
    judge(Rule::AnswersInTime, Ok(in_time(&contract)));
    Ok(Report { base_url: kit.base_url.clone(), tool: Some(description.name), findings })
}

/// `describe`: the description, its schema valid JSON Schema 2020-12, its effects stated, and
/// parameters to check the other rules with.
async fn describe(contract: &Contract, kit: &Kit) -> Result<(ToolDescription, Map<String, Value>), String> {
    let answer = contract.describe().await?;
    if answer.status != 200 {
        return Err(format!("describe answered {}", answer.told()));
    }
    let description: ToolDescription = read(&answer, Operation::Describe)?;
    let schema = &description.parameters_schema;
    let validator = jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| format!("parameters_schema is not a valid JSON Schema (2020-12): {e}"))?;
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("parameters_schema must describe an object (type \"object\")".to_owned());
    }
    if description.effects.is_none() {
        return Err("the description does not say what running the tool does (effects)".to_owned());
    }
    let example = match &kit.example {
        Some(example) => example.clone(),
        None => schema
            .get("examples")
            .and_then(Value::as_array)
            .and_then(|examples| examples.first())
            .and_then(Value::as_object)
            .cloned()
            .ok_or("parameters_schema has no `examples` to check with (or pass parameters with --example)")?,
    };
    if let Some(problem) = validator.iter_errors(&Value::Object(example.clone())).next() {
        return Err(format!("the example parameters do not match the tool's own schema: {problem}"));
    }
    Ok((description, example))
}

async fn validate_accepts(
    contract: &Contract,
    description: &ToolDescription,
    example: &Map<String, Value>,
) -> Result<Validated, String> {
    let answer = contract.post("validate", &json!({"parameters": example}), Signing::Valid).await?;
    if answer.status != 200 {
        return Err(format!("validate refused parameters its own schema accepts: {}", answer.told()));
    }
    let validated: Validated = read(&answer, Operation::Validate)?;
    if let Ok(validator) = jsonschema::draft202012::new(&description.parameters_schema)
        && let Some(problem) = validator.iter_errors(&Value::Object(validated.parameters.clone())).next()
    {
        return Err(format!("the normalized parameters break the tool's own schema: {problem}"));
    }
    Ok(validated)
}

/// Malformed input (parameters that are not an object) is refused with 400 or 422; input the
/// schema refuses is refused with 422 and field problems.
async fn validate_refuses(
    contract: &Contract,
    description: &ToolDescription,
    example: &Map<String, Value>,
) -> Result<Verdict, String> {
    let malformed = contract.post("validate", &json!({"parameters": "not an object"}), Signing::Valid).await?;
    if !matches!(malformed.status, 400 | 422) {
        return Err(format!("parameters that are not an object were answered {}", malformed.told()));
    }
    let Some(broken) = out_of_schema(&description.parameters_schema, example) else {
        return Ok(Verdict::Skip("the schema requires nothing and types nothing to break".to_owned()));
    };
    let answer = contract.post("validate", &json!({"parameters": broken}), Signing::Valid).await?;
    let has_fields = answer.body["fields"].as_array().is_some_and(|fields| !fields.is_empty());
    if answer.status != 422 || !has_fields {
        return Err(format!(
            "parameters the schema refuses ({}) were answered {}",
            Value::Object(broken),
            answer.told()
        ));
    }
    Ok(Verdict::Pass)
}

/// The example broken against its schema: a required field left out, or else a typed one given
/// a value of another type.
fn out_of_schema(schema: &Value, example: &Map<String, Value>) -> Option<Map<String, Value>> {
    let mut broken = example.clone();
    if let Some(required) = schema["required"].as_array().and_then(|r| r.first()).and_then(Value::as_str) {
        broken.remove(required);
        return Some(broken);
    }
    let (name, property) = schema["properties"].as_object()?.iter().find(|(_, p)| p["type"].is_string())?;
    let wrong = if property["type"] == "array" { json!("not a list") } else { json!([]) };
    broken.insert(name.clone(), wrong);
    Some(broken)
}

async fn summarize(
    contract: &Contract,
    parameters: &Map<String, Value>,
    validated: Option<&Validated>,
) -> Result<Verdict, String> {
    let body = json!({"parameters": parameters});
    let first = contract.post("summarize", &body, Signing::Valid).await?;
    let second = contract.post("summarize", &body, Signing::Valid).await?;
    if first.status != 200 || second.status != 200 {
        return Err(format!("summarize answered {} then {}", first.told(), second.told()));
    }
    read::<Summary>(&first, Operation::Summarize)?;
    if first.body != second.body {
        return Err(format!("the same parameters were summarized as {} then {}", first.body, second.body));
    }
    if let Some(validated) = validated
        && first.body["summary"] != validated.summary.as_str()
    {
        return Err(format!("summarize said {} where validate said {:?}", first.body["summary"], validated.summary));
    }
    Ok(Verdict::Pass)
}

/// `answer`'s body read as the contract's answer to `operation`, as the lifecycle reads it
/// (`gatehouse_domain::contract::read_answer`); a breach names the field.
fn read<T: ContractAnswer>(answer: &Answer, operation: Operation) -> Result<T, String> {
    let body = serde_json::to_vec(&answer.body).map_err(|e| e.to_string())?;
    read_answer(operation, &body).map_err(|breach| format!("{breach}: {}", answer.told()))
}

/// A rule about `prepare`, checked only for a tool that has one: `rule` is not run otherwise.
async fn checkpointed(
    needs_checkpoint: bool,
    rule: impl std::future::Future<Output = Result<Verdict, String>>,
) -> Result<Verdict, String> {
    if needs_checkpoint {
        rule.await
    } else {
        Ok(Verdict::Skip("the tool needs no checkpoint, so it has no prepare".to_owned()))
    }
}

fn keeps_calls_in_gatehouse() -> Verdict {
    Verdict::Skip(
        "the tool answered 404 for a call it was never told of: it keeps its calls in a Gatehouse \
         database; check it through that application (--through)"
            .to_owned(),
    )
}

/// `prepare` for a call the kit made up: its checkpoint (`Null` for none); or, for a tool that
/// refuses calls it was never told of, the skip that says so.
async fn prepare(contract: &Contract, id: &str, parameters: &Value) -> Result<Result<Value, Verdict>, String> {
    let answer = contract.post("prepare", &on_call(id, parameters, &Value::Null), Signing::Valid).await?;
    match answer.status {
        200 => {}
        UNKNOWN_CALL => return Ok(Err(keeps_calls_in_gatehouse())),
        _ => return Err(format!("prepare was answered {}", answer.told())),
    }
    // Only a tool that declared a checkpoint is asked to prepare: it must answer one.
    let prepared: Prepared = read(&answer, Operation::Prepare)?;
    let checkpoint = declared_checkpoint(true, prepared.checkpoint).map_err(|breach| breach.to_string())?;
    Ok(Ok(checkpoint.map(|c| json!({"message": c.message, "state": c.state})).unwrap_or(Value::Null)))
}

/// After `discard`, the call's `prepare` and `execute` are refused (409).
async fn refused_after_discard(
    contract: &Contract,
    id: &str,
    parameters: &Value,
    checkpoint: &Value,
) -> Result<Verdict, String> {
    let again = contract.post("prepare", &on_call(id, parameters, &Value::Null), Signing::Valid).await?;
    if again.status != 409 {
        return Err(format!("a prepare after discard was answered {}", again.told()));
    }
    let executed = contract.post("execute", &on_call(id, parameters, checkpoint), Signing::Valid).await?;
    if executed.status != 409 {
        return Err(format!("an execute after discard was answered {}: a discarded call ran", executed.told()));
    }
    Ok(Verdict::Pass)
}

async fn discard_directly(contract: &Contract, parameters: &Value) -> Result<Verdict, String> {
    let id = new_call_id();
    let checkpoint = match prepare(contract, &id, parameters).await? {
        Ok(checkpoint) => checkpoint,
        Err(skip) => return Ok(skip),
    };
    let discarded = contract.post("discard", &on_call(&id, parameters, &checkpoint), Signing::Valid).await?;
    if discarded.status != 200 {
        return Err(format!("discard was answered {}", discarded.told()));
    }
    read::<Discarded>(&discarded, Operation::Discard)?;
    refused_after_discard(contract, &id, parameters, &checkpoint).await
}

async fn execute_unprepared_directly(contract: &Contract, parameters: &Value) -> Result<Verdict, String> {
    let answer = contract.post("execute", &on_call(&new_call_id(), parameters, &Value::Null), Signing::Valid).await?;
    match answer.status {
        409 => Ok(Verdict::Pass),
        UNKNOWN_CALL => Ok(keeps_calls_in_gatehouse()),
        _ => Err(format!("an execute with no prepare before it was answered {}", answer.told())),
    }
}

async fn execute_twice_directly(
    contract: &Contract,
    description: &ToolDescription,
    parameters: &Value,
) -> Result<Verdict, String> {
    let id = new_call_id();
    let checkpoint = if description.needs_checkpoint {
        match prepare(contract, &id, parameters).await? {
            Ok(checkpoint) => checkpoint,
            Err(skip) => return Ok(skip),
        }
    } else {
        Value::Null
    };
    let request = on_call(&id, parameters, &checkpoint);
    let first = contract.post("execute", &request, Signing::Valid).await?;
    if first.status == UNKNOWN_CALL {
        return Ok(keeps_calls_in_gatehouse());
    }
    if first.status != 200 {
        return Err(format!("execute was answered {}", first.told()));
    }
    read::<Executed>(&first, Operation::Execute)?;
    let second = contract.post("execute", &request, Signing::Valid).await?;
    same_outcome(&first, &second)
}

/// The second `execute` of a call answers what the first did.
fn same_outcome(first: &Answer, second: &Answer) -> Result<Verdict, String> {
    let parse = |answer: &Answer| serde_json::from_value::<Executed>(answer.body.clone()).ok();
    match (parse(first), parse(second)) {
        (Some(one), Some(two)) if second.status == 200 && one == two => Ok(Verdict::Pass),
        (Some(one), Some(two)) => Err(format!(
            "the same call's second execute answered {} where the first answered {}: it ran twice",
            two.result, one.result
        )),
        _ => Err(format!("execute answered {} then {}", first.told(), second.told())),
    }
}

async fn discard_through(
    contract: &Contract,
    calls: &Calls<'_>,
    parameters: &Map<String, Value>,
) -> Result<Verdict, String> {
    let id = calls.create(parameters).await?;
    let call = calls.confirm(&id).await?;
    if call["status"] != "PREPARED" {
        return Err(format!("the call did not stop at its checkpoint: {call}"));
    }
    // The cancel has the tool discard what prepare left.
    calls.cancel(&id).await?;
    refused_after_discard(contract, &id, &Value::Object(parameters.clone()), &call["checkpoint"]).await
}

async fn execute_unprepared_through(
    contract: &Contract,
    calls: &Calls<'_>,
    parameters: &Map<String, Value>,
) -> Result<Verdict, String> {
    let id = calls.create(parameters).await?;
    let answer =
        contract.post("execute", &on_call(&id, &Value::Object(parameters.clone()), &Value::Null), Signing::Valid).await;
    calls.cancel(&id).await?;
    let answer = answer?;
    if answer.status != 409 {
        return Err(format!("an execute of a call that was never prepared was answered {}", answer.told()));
    }
    Ok(Verdict::Pass)
}

async fn execute_twice_through(
    contract: &Contract,
    calls: &Calls<'_>,
    description: &ToolDescription,
    parameters: &Map<String, Value>,
) -> Result<Verdict, String> {
    let id = calls.create(parameters).await?;
    let mut call = calls.confirm(&id).await?;
    if description.needs_checkpoint && call["status"] == "PREPARED" {
        call = calls.proceed(&id).await?;
    }
    if call["status"] != "COMPLETED" {
        return Err(format!("the call did not complete: {call}"));
    }
    let first = Answer {
        status: 200,
        body: json!({"result": call["result"], "voice_response": call["voice_response"]}),
        signed_as: None,
    };
    let request = on_call(&id, &Value::Object(parameters.clone()), &call["checkpoint"]);
    let second = contract.post("execute", &request, Signing::Valid).await?;
    same_outcome(&first, &second)
}

/// A request signed as `signing` says is refused with 401.
async fn refused_when(contract: &Contract, body: &Value, signing: Signing, what: &str) -> Result<Verdict, String> {
    if !contract.has_secret() {
        return Ok(Verdict::Skip("no contract secret given (GATEHOUSE_CONTRACT_SECRET)".to_owned()));
    }
    let answer = contract.post("validate", body, signing).await?;
    if answer.status != 401 {
        return Err(format!("{what} validate was answered {}", answer.told()));
    }
    Ok(Verdict::Pass)
}

async fn replay(contract: &Contract, body: &Value) -> Result<Verdict, String> {
    if !contract.has_secret() {
        return Ok(Verdict::Skip("no contract secret given (GATEHOUSE_CONTRACT_SECRET)".to_owned()));
    }
    let (first, second) = contract.post_twice("validate", body).await?;
    if first.status != 200 {
        return Err(format!("a signed validate was answered {}", first.told()));
    }
    if second.status != 401 {
        return Err(format!("the same signed request sent again was answered {}", second.told()));
    }
    Ok(Verdict::Pass)
}

fn in_time(contract: &Contract) -> Verdict {
    let late = contract.late();
    if late.is_empty() { Verdict::Pass } else { Verdict::Fail(format!("cut at the timeout: {}", late.join(", "))) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_example_is_broken_by_a_missing_required_field_or_a_wrong_type() {
        let example = json!({"name": "Ada", "size": 4}).as_object().cloned().unwrap_or_default();
        let required = json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}});
        assert_eq!(out_of_schema(&required, &example).map(|b| b.contains_key("name")), Some(false));
        let typed = json!({"type": "object", "properties": {"size": {"type": "integer"}}});
        assert_eq!(out_of_schema(&typed, &example).map(|b| b["size"].clone()), Some(json!([])));
        assert_eq!(out_of_schema(&json!({"type": "object"}), &example), None);
    }
}
