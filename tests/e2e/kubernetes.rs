//! deploy/kubernetes (SpinKube) and deploy/runtime-config.toml, checked against spin.toml: the
//! SpinApps split the components into groups that cover every component exactly once, each
//! group is given every required variable its components read (secrets from the Secret), the
//! groups point their origin variables at each other's Services, the migration Job runs
//! `gatehouse migrate` and the sweep CronJob posts to the sweep route. The manifests are parsed
//! file by file and as `kubectl kustomize` renders them. Needs kubectl (`scripts/setup --tests`),
//! no database.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use gatehouse_tests::workspace_root;
use serde::Deserialize;
use serde_yaml::Value;

const SPINAPP_API: &str = "core.spinkube.dev/v1alpha1";

/// Which component each origin variable reaches when it keeps its service-chaining default
/// (`tools_origin` reaches every tool).
const ORIGINS: [(&str, &str); 3] =
    [("executor_origin", "async-executor"), ("tools_origin", "gmail"), ("tools_origin", "vector-query")];

fn kube_dir() -> PathBuf {
    workspace_root().join("deploy/kubernetes")
}

/// Every document of a YAML stream, empty ones (a lone `---`) left out.
fn documents(text: &str, origin: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{origin}: {e}")))
        .filter(|doc| !doc.is_null())
        .collect()
}

fn string_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(value, |v, key| v.get(*key))?.as_str()
}

fn kind(doc: &Value) -> &str {
    string_at(doc, &["kind"]).unwrap_or("")
}

fn name(doc: &Value) -> &str {
    string_at(doc, &["metadata", "name"]).unwrap_or("")
}

/// `{{ name }}` templates in a manifest string.
fn templates(text: &str) -> Vec<String> {
    text.split("{{")
        .skip(1)
        .filter_map(|rest| rest.split_once("}}"))
        .map(|(inner, _)| inner.trim().to_owned())
        .collect()
}

struct Manifest {
    /// `[variables]`: name -> (required without a default, secret).
    variables: BTreeMap<String, (bool, bool)>,
    /// Component id -> the variables its `[component.X.variables]` templates read.
    reads: BTreeMap<String, BTreeSet<String>>,
    /// Component id -> the variables its allowed_outbound_hosts templates use.
    outbound: BTreeMap<String, BTreeSet<String>>,
}

fn manifest() -> Manifest {
    let text = std::fs::read_to_string(workspace_root().join("spin.toml")).expect("spin.toml");
    let toml: toml::Table = toml::from_str(&text).expect("spin.toml parses");
    let variables = toml["variables"]
        .as_table()
        .expect("[variables]")
        .iter()
        .map(|(name, spec)| {
            let flag = |key: &str| spec.get(key).and_then(toml::Value::as_bool).unwrap_or(false);
            (name.clone(), (flag("required") && spec.get("default").is_none(), flag("secret")))
        })
        .collect();
    let components = toml["component"].as_table().expect("[component.*]");
    let strings = |value: Option<&toml::Value>| -> BTreeSet<String> {
        let mut found = BTreeSet::new();
        let mut stack: Vec<&toml::Value> = value.into_iter().collect();
        while let Some(v) = stack.pop() {
            match v {
                toml::Value::String(s) => found.extend(templates(s)),
                toml::Value::Array(items) => stack.extend(items),
                toml::Value::Table(table) => stack.extend(table.values()),
                _ => {}
            }
        }
        found
    };
    let reads = components.iter().map(|(id, c)| (id.clone(), strings(c.get("variables")))).collect();
    let outbound = components.iter().map(|(id, c)| (id.clone(), strings(c.get("allowed_outbound_hosts")))).collect();
    Manifest { variables, reads, outbound }
}

/// The files of deploy/kubernetes, each parsed on its own.
fn files() -> BTreeMap<String, Vec<Value>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(kube_dir()).expect("deploy/kubernetes") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&path).expect("a manifest file");
            let docs = documents(&text, &file);
            assert!(!docs.is_empty(), "{file} holds no document");
            files.insert(file, docs);
        }
    }
    files
}

/// `kubectl kustomize deploy/kubernetes`, parsed.
fn rendered() -> Vec<Value> {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(kube_dir())
        .output()
        .expect("kubectl runs (scripts/setup --tests installs it)");
    assert!(output.status.success(), "kubectl kustomize failed:\n{}", String::from_utf8_lossy(&output.stderr));
    documents(&String::from_utf8(output.stdout).expect("UTF-8 output"), "kubectl kustomize")
}

fn one<'a>(docs: &'a [Value], wanted: &str) -> &'a Value {
    let found: Vec<&Value> = docs.iter().filter(|d| kind(d) == wanted).collect();
    assert_eq!(found.len(), 1, "expected exactly one {wanted}, found {}", found.len());
    found[0]
}

fn named<'a>(docs: &'a [Value], wanted: &str, object: &str) -> &'a Value {
    docs.iter().find(|d| kind(d) == wanted && name(d) == object).unwrap_or_else(|| panic!("no {wanted} {object}"))
}

/// A Deployment's pod template, which must run `gatehouse <command> --listen ADDR`, and the
/// port of ADDR.
fn serving<'a>(deployment: &'a Value, command: &str) -> (&'a Value, String) {
    let pod = ["spec", "template", "spec"].iter().try_fold(deployment, |v, key| v.get(*key)).expect("a pod template");
    let line = command_line(pod);
    assert!(line.contains(command), "the Deployment runs `gatehouse {command}`: {line}");
    let listen = line.split_whitespace().skip_while(|w| *w != "--listen").nth(1).expect("--listen ADDR");
    (pod, listen.rsplit(':').next().expect("a port").to_owned())
}

fn keys(doc: &Value, fields: &[&str]) -> BTreeSet<String> {
    fields
        .iter()
        .filter_map(|field| doc.get(*field).and_then(Value::as_mapping))
        .flat_map(|map| map.keys().filter_map(Value::as_str).map(str::to_owned))
        .collect()
}

/// Every `secretKeyRef` and `configMapKeyRef` anywhere under `value`, as (kind, name, key).
fn key_refs(value: &Value, found: &mut Vec<(&'static str, String, String)>) {
    match value {
        Value::Mapping(map) => {
            for (field, inner) in map {
                let kind = match field.as_str() {
                    Some("secretKeyRef") => Some("Secret"),
                    Some("configMapKeyRef") => Some("ConfigMap"),
                    _ => None,
                };
                if let Some(kind) = kind {
                    let get = |k: &str| string_at(inner, &[k]).unwrap_or("").to_owned();
                    found.push((kind, get("name"), get("key")));
                }
                key_refs(inner, found);
            }
        }
        Value::Sequence(items) => items.iter().for_each(|item| key_refs(item, found)),
        _ => {}
    }
}

/// The one container of a Job's or CronJob's pod template: its command and args, joined.
fn command_line(pod_spec: &Value) -> String {
    let containers = pod_spec.get("containers").and_then(Value::as_sequence).expect("containers");
    assert_eq!(containers.len(), 1, "one container");
    ["command", "args"]
        .iter()
        .filter_map(|f| containers[0].get(*f).and_then(Value::as_sequence))
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ")
}

struct SpinApp<'a> {
    name: &'a str,
    components: Vec<&'a str>,
    /// Variable name -> its binding (`value` or `valueFrom`).
    variables: BTreeMap<&'a str, &'a Value>,
}

fn spinapps(docs: &[Value]) -> Vec<SpinApp<'_>> {
    docs.iter()
        .filter(|d| kind(d) == "SpinApp")
        .map(|d| {
            let spec = d.get("spec").expect("a SpinApp has a spec");
            let components = spec
                .get("components")
                .and_then(Value::as_sequence)
                .unwrap_or_else(|| panic!("SpinApp {} names no components (it would run them all)", name(d)))
                .iter()
                .map(|c| c.as_str().expect("a component id"))
                .collect();
            let variables = spec
                .get("variables")
                .and_then(Value::as_sequence)
                .into_iter()
                .flatten()
                .map(|v| (string_at(v, &["name"]).expect("a variable has a name"), v))
                .collect();
            SpinApp { name: name(d), components, variables }
        })
        .collect()
}

/// A variable's value as the pod sees it: a literal, or the ConfigMap's entry.
fn resolve<'a>(binding: &'a Value, config: &'a Value) -> Option<&'a str> {
    if let Some(value) = string_at(binding, &["value"]) {
        return Some(value);
    }
    let key = string_at(binding, &["valueFrom", "configMapKeyRef", "key"])?;
    string_at(config, &["data", key])
}

#[test]
fn every_file_parses_and_the_kustomization_lists_them_all() {
    let files = files();
    let kustomization = files.get("kustomization.yaml").expect("deploy/kubernetes/kustomization.yaml");
    let listed: BTreeSet<String> = kustomization[0]
        .get("resources")
        .and_then(Value::as_sequence)
        .expect("resources")
        .iter()
        .map(|r| r.as_str().expect("a resource path").to_owned())
        .collect();
    let present: BTreeSet<String> = files.keys().filter(|f| *f != "kustomization.yaml").cloned().collect();
    assert_eq!(listed, present, "kustomization.yaml lists exactly the other manifests");
    let from_files: usize = files.iter().filter(|(f, _)| *f != "kustomization.yaml").map(|(_, d)| d.len()).sum();
    assert_eq!(rendered().len(), from_files, "kubectl kustomize renders every document");
}

/// The SpinApps reach each other (the tool contract, the executor hand-off) over their Services,
/// in plain HTTP as far as the Spin shim knows: every object lives in a namespace that joins
/// Istio's ambient mesh, whose node proxies carry that traffic over mutual TLS.
#[test]
fn every_object_lives_in_a_namespace_whose_traffic_the_mesh_encrypts() {
    let files = files();
    assert_eq!(string_at(&files["kustomization.yaml"][0], &["namespace"]), Some("gatehouse"));
    let docs = rendered();
    let namespace = one(&docs, "Namespace");
    assert_eq!(name(namespace), "gatehouse");
    assert_eq!(string_at(namespace, &["metadata", "labels", "istio.io/dataplane-mode"]), Some("ambient"));
    for doc in docs.iter().filter(|d| kind(d) != "Namespace") {
        assert_eq!(string_at(doc, &["metadata", "namespace"]), Some("gatehouse"), "{} {}", kind(doc), name(doc));
    }
}

#[test]
fn the_spinapps_split_the_components_and_get_every_variable_they_need() {
    let spin = manifest();
    let docs = rendered();
    let secret = one(&docs, "Secret");
    let config = one(&docs, "ConfigMap");
    let apps = spinapps(&docs);
    assert_eq!(apps.len(), 3, "three SpinApps: edge, executor, tools");

    let images: BTreeSet<&str> = docs
        .iter()
        .filter(|d| kind(d) == "SpinApp")
        .map(|d| {
            assert_eq!(string_at(d, &["apiVersion"]), Some(SPINAPP_API), "{}", name(d));
            assert_eq!(string_at(d, &["spec", "executor"]), Some("containerd-shim-spin"), "{}", name(d));
            string_at(d, &["spec", "image"]).expect("an image")
        })
        .collect();
    assert_eq!(images.len(), 1, "one application image for every SpinApp: {images:?}");

    // Every component of spin.toml in exactly one group, and nothing else.
    let mut placed: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for app in &apps {
        for component in &app.components {
            assert!(spin.reads.contains_key(*component), "{} names '{component}', not in spin.toml", app.name);
            placed.entry(component).or_default().push(app.name);
        }
    }
    for component in spin.reads.keys() {
        match placed.get(component.as_str()).map(Vec::as_slice) {
            Some([_]) => {}
            None | Some([]) => panic!("no SpinApp runs '{component}'"),
            Some(apps) => panic!("'{component}' runs in more than one place: {apps:?}"),
        }
    }

    for app in &apps {
        // Every variable bound exists in spin.toml, and every secret comes from the Secret.
        for (variable, binding) in &app.variables {
            let (_, secret_var) = spin
                .variables
                .get(*variable)
                .unwrap_or_else(|| panic!("{}: '{variable}' is not in spin.toml", app.name));
            let has_value = binding.get("value").is_some() || binding.get("valueFrom").is_some();
            assert!(has_value, "{}: '{variable}' has neither value nor valueFrom", app.name);
            if *secret_var {
                let key = string_at(binding, &["valueFrom", "secretKeyRef", "key"]);
                assert!(key.is_some(), "{}: the secret '{variable}' must come from a secretKeyRef", app.name);
            }
        }
        // Every required variable its components read.
        for component in &app.components {
            for variable in &spin.reads[*component] {
                let (required, _) = spin.variables.get(variable).unwrap_or_else(|| {
                    panic!("spin.toml: component '{component}' reads '{variable}', which [variables] lacks")
                });
                if *required {
                    assert!(
                        app.variables.contains_key(variable.as_str()),
                        "{}: '{component}' reads the required variable '{variable}', which is not provided",
                        app.name
                    );
                }
            }
        }
        // A component that chains to one another group runs must be pointed at that group's Service.
        for (variable, target) in ORIGINS {
            if app.components.contains(&target) {
                continue;
            }
            let Some(user) = app.components.iter().find(|c| spin.outbound[**c].contains(variable)) else { continue };
            let binding = app.variables.get(variable).unwrap_or_else(|| {
                panic!(
                    "{}: '{user}' reaches '{target}' through {variable}, but the SpinApp sets no {variable}",
                    app.name
                )
            });
            let origin = resolve(binding, config).unwrap_or_else(|| panic!("{}: {variable} has no value", app.name));
            let host = origin.trim_end_matches('/').strip_prefix("http://").unwrap_or(origin);
            let served_by = apps.iter().find(|a| a.components.contains(&target)).expect("some SpinApp runs it");
            assert_eq!(host, served_by.name, "{}: {variable} = {origin} is not the Service of '{target}'", app.name);
        }
    }

    // Every key reference (SpinApps, Job, CronJob) names an existing Secret or ConfigMap key.
    let mut refs = Vec::new();
    docs.iter().for_each(|d| key_refs(d, &mut refs));
    assert!(!refs.is_empty());
    for (ref_kind, ref_name, key) in refs {
        let (target, fields): (&Value, &[&str]) =
            if ref_kind == "Secret" { (secret, &["stringData", "data"]) } else { (config, &["data"]) };
        assert_eq!(ref_name, name(target), "a {ref_kind} reference names '{ref_name}'");
        assert!(keys(target, fields).contains(&key), "the {ref_kind} '{ref_name}' has no key '{key}'");
    }
}

#[test]
fn the_job_migrates_and_the_cronjob_sweeps() {
    let docs = rendered();
    let job = one(&docs, "Job");
    let pod = job.get("spec").and_then(|s| s.get("template")).and_then(|t| t.get("spec")).expect("a pod template");
    let line = command_line(pod);
    assert!(line.split_whitespace().any(|w| w == "migrate"), "the Job runs `gatehouse migrate`: {line}");
    let mut refs = Vec::new();
    key_refs(pod, &mut refs);
    assert!(refs.contains(&("Secret", "gatehouse".into(), "db_url".into())), "the Job reads db_url: {refs:?}");

    let cron = one(&docs, "CronJob");
    assert_eq!(string_at(cron, &["spec", "concurrencyPolicy"]), Some("Forbid"));
    assert_eq!(string_at(cron, &["spec", "schedule"]), Some("* * * * *"));
    let pod = ["spec", "jobTemplate", "spec", "template", "spec"]
        .iter()
        .try_fold(cron, |v, key| v.get(*key))
        .expect("the CronJob's pod template");
    let line = command_line(pod);
    assert!(line.contains("POST"), "the CronJob posts: {line}");
    let url = line.split_whitespace().find(|w| w.contains("/voice-tools/sweep")).expect("the sweep URL");
    let host = url.strip_prefix("http://").and_then(|rest| rest.split('/').next()).expect("an http URL");
    let apps = spinapps(&docs);
    let sweeper = apps.iter().find(|a| a.components.contains(&"sweeper")).expect("a SpinApp runs the sweeper");
    assert_eq!(host, sweeper.name, "the CronJob posts to the Service of the SpinApp that runs the sweeper");
    let mut refs = Vec::new();
    key_refs(pod, &mut refs);
    assert!(refs.contains(&("Secret", "gatehouse".into(), "api_token".into())), "the sweep sends the token: {refs:?}");
}

/// The embeddings server runs `gatehouse embeddings serve` on the port its Service forwards
/// to, with the Secret's token; the tools group's `embeddings_url` and `embeddings_host` reach
/// that Service, and the group sends the same token.
#[test]
fn the_vector_tool_reaches_the_embeddings_server_with_its_token() {
    let docs = rendered();
    let deployment = named(&docs, "Deployment", "gatehouse-embeddings");
    let (pod, container_port) = serving(deployment, "embeddings serve");
    let mut refs = Vec::new();
    key_refs(pod, &mut refs);
    assert!(refs.contains(&("Secret", "gatehouse".into(), "embeddings_api_key".into())), "the token: {refs:?}");

    let service = docs
        .iter()
        .find(|d| kind(d) == "Service" && name(d) == name(deployment))
        .expect("a Service named after the Deployment");
    let port = service.get("spec").and_then(|s| s.get("ports")).and_then(Value::as_sequence).expect("ports");
    assert_eq!(port.len(), 1);
    let service_port = port[0].get("port").and_then(Value::as_u64).expect("a port number").to_string();
    let target = string_at(&port[0], &["targetPort"]).expect("a named target port");
    let containers = pod.get("containers").and_then(Value::as_sequence).expect("containers");
    let named = containers[0].get("ports").and_then(Value::as_sequence).expect("container ports");
    let named = named.iter().find(|p| string_at(p, &["name"]) == Some(target)).expect("the target port is named");
    assert_eq!(named.get("containerPort").and_then(Value::as_u64).map(|p| p.to_string()), Some(container_port.clone()));

    let config = one(&docs, "ConfigMap");
    let apps = spinapps(&docs);
    let tools = apps.iter().find(|a| a.components.contains(&"vector-query")).expect("a group runs vector-query");
    let variable = |v: &str| tools.variables.get(v).and_then(|b| resolve(b, config)).unwrap_or_default().to_owned();
    let reach = format!("{}:{service_port}", name(service));
    assert_eq!(variable("embeddings_provider"), "openai");
    assert_eq!(variable("embeddings_url"), format!("http://{reach}/v1/embeddings"));
    assert_eq!(variable("embeddings_host"), reach);
    let mut refs = Vec::new();
    key_refs(tools.variables.get("embeddings_api_key").copied().expect("the group sends a key"), &mut refs);
    assert_eq!(refs, [("Secret", "gatehouse".into(), "embeddings_api_key".into())]);
}

/// The metrics Deployment serves the database's gauges from the Secret's db_url, on the port its
/// Service forwards to and announces for scraping.
#[test]
fn prometheus_scrapes_the_database_gauges() {
    let docs = rendered();
    let deployment = named(&docs, "Deployment", "gatehouse-metrics");
    let (pod, container_port) = serving(deployment, "metrics serve");
    let mut refs = Vec::new();
    key_refs(pod, &mut refs);
    assert_eq!(refs, [("Secret", "gatehouse".into(), "db_url".into())]);
    let service = named(&docs, "Service", "gatehouse-metrics");
    let annotation = |key: &str| string_at(service, &["metadata", "annotations", key]).map(str::to_owned);
    assert_eq!(annotation("prometheus.io/scrape").as_deref(), Some("true"));
    assert_eq!(annotation("prometheus.io/path").as_deref(), Some("/metrics"));
    assert_eq!(annotation("prometheus.io/port"), Some(container_port.clone()));
    let ports = service.get("spec").and_then(|s| s.get("ports")).and_then(Value::as_sequence).expect("ports");
    assert_eq!(ports[0].get("port").and_then(Value::as_u64).map(|p| p.to_string()), Some(container_port));
}

#[test]
fn the_runtime_config_has_a_vault_variables_provider() {
    let path: &Path = &workspace_root().join("deploy/runtime-config.toml");
    let text = std::fs::read_to_string(path).expect("deploy/runtime-config.toml");
    let config: toml::Table = toml::from_str(&text).expect("runtime-config.toml parses");
    // Spin's documentation says [[config_provider]]; Spin also reads [[variables_provider]].
    let providers: Vec<&toml::Value> = ["config_provider", "variables_provider"]
        .iter()
        .filter_map(|t| config.get(*t).and_then(toml::Value::as_array))
        .flatten()
        .collect();
    let vault = providers
        .iter()
        .find(|p| p.get("type").and_then(toml::Value::as_str) == Some("vault"))
        .expect("a provider of type vault");
    for key in ["url", "token", "mount"] {
        assert!(vault.get(key).and_then(toml::Value::as_str).is_some_and(|v| !v.is_empty()), "vault needs {key}");
    }
}
