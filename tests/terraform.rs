#![allow(clippy::unwrap_used)]
//! infra/cloudflare, the managed variant: Terraform cannot run here, so its files are parsed and
//! checked against each other (resources, variables declared and used, the page template), and
//! `export-terraform` is checked to carry config/drop.toml into variables they declare.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use hcl::expr::{Operation, TemplateExpr, TraversalOperator};
use hcl::template::{Directive, Element};
use hcl::{Block, Body, Expression};
use waitroom::config::RoomSettings;
use waitroom::config::file::ConfigFile;
use waitroom::custom_page::CustomPage;
use waitroom::export::bypass_expression;

fn infra() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("infra/cloudflare")
}

/// Every .tf file of the module, parsed.
fn module() -> Vec<(String, Body)> {
    let mut files: Vec<(String, Body)> = std::fs::read_dir(infra())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "tf"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let body = hcl::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                body,
            )
        })
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["main.tf", "outputs.tf", "variables.tf", "versions.tf"]
    );
    files
}

fn blocks<'a>(files: &'a [(String, Body)], kind: &'a str) -> impl Iterator<Item = &'a Block> {
    files
        .iter()
        .flat_map(move |(_, body)| body.blocks().filter(move |b| b.identifier() == kind))
}

fn label(block: &Block, index: usize) -> &str {
    block.labels().get(index).map_or("", |l| l.as_str())
}

fn resource<'a>(files: &'a [(String, Body)], kind: &str) -> &'a Block {
    blocks(files, "resource")
        .find(|b| label(b, 0) == kind)
        .unwrap_or_else(|| panic!("no resource {kind}"))
}

fn attribute<'a>(body: &'a Body, key: &str) -> &'a Expression {
    body.attributes()
        .find(|a| a.key() == key)
        .map(|a| a.expr())
        .unwrap_or_else(|| panic!("no attribute {key}"))
}

/// The names X of every `var.X` in an expression, string templates included.
fn collect_vars(expr: &Expression, out: &mut BTreeSet<String>) {
    match expr {
        Expression::Traversal(t) => {
            if let (Expression::Variable(v), Some(TraversalOperator::GetAttr(name))) =
                (&t.expr, t.operators.first())
                && v.as_str() == "var"
            {
                out.insert(name.to_string());
            }
            collect_vars(&t.expr, out);
            for op in &t.operators {
                if let TraversalOperator::Index(e) = op {
                    collect_vars(e, out);
                }
            }
        }
        Expression::Array(items) => items.iter().for_each(|e| collect_vars(e, out)),
        Expression::Object(object) => {
            for (key, value) in object {
                if let hcl::ObjectKey::Expression(k) = key {
                    collect_vars(k, out);
                }
                collect_vars(value, out);
            }
        }
        Expression::TemplateExpr(t) => collect_template_vars(t, out),
        Expression::FuncCall(f) => f.args.iter().for_each(|e| collect_vars(e, out)),
        Expression::Parenthesis(e) => collect_vars(e, out),
        Expression::Conditional(c) => {
            for e in [&c.cond_expr, &c.true_expr, &c.false_expr] {
                collect_vars(e, out);
            }
        }
        Expression::Operation(op) => match op.as_ref() {
            Operation::Unary(u) => collect_vars(&u.expr, out),
            Operation::Binary(b) => {
                collect_vars(&b.lhs_expr, out);
                collect_vars(&b.rhs_expr, out);
            }
        },
        Expression::ForExpr(f) => {
            collect_vars(&f.collection_expr, out);
            collect_vars(&f.value_expr, out);
            for e in f.key_expr.iter().chain(f.cond_expr.iter()) {
                collect_vars(e, out);
            }
        }
        _ => {}
    }
}

fn collect_template_vars(t: &TemplateExpr, out: &mut BTreeSet<String>) {
    let template = hcl::Template::from_expr(t).unwrap();
    collect_elements(template.elements(), out);
}

fn collect_elements(elements: &[Element], out: &mut BTreeSet<String>) {
    for element in elements {
        match element {
            Element::Interpolation(i) => collect_vars(&i.expr, out),
            Element::Directive(d) => match d.as_ref() {
                Directive::If(i) => {
                    collect_vars(&i.cond_expr, out);
                    collect_elements(i.true_template.elements(), out);
                    if let Some(f) = &i.false_template {
                        collect_elements(f.elements(), out);
                    }
                }
                Directive::For(f) => {
                    collect_vars(&f.collection_expr, out);
                    collect_elements(f.template.elements(), out);
                }
            },
            Element::Literal(_) => {}
        }
    }
}

fn collect_body_vars(body: &Body, out: &mut BTreeSet<String>) {
    for a in body.attributes() {
        collect_vars(a.expr(), out);
    }
    for b in body.blocks() {
        collect_body_vars(b.body(), out);
    }
}

fn declared(files: &[(String, Body)]) -> BTreeSet<String> {
    blocks(files, "variable")
        .map(|b| label(b, 0).to_owned())
        .collect()
}

/// Variables terraform asks for: no default.
fn required(files: &[(String, Body)]) -> BTreeSet<String> {
    blocks(files, "variable")
        .filter(|b| b.body().attributes().all(|a| a.key() != "default"))
        .map(|b| label(b, 0).to_owned())
        .collect()
}

#[test]
fn the_provider_is_pinned_to_v5() {
    let files = module();
    let terraform = blocks(&files, "terraform").next().unwrap();
    let providers = terraform
        .body()
        .blocks()
        .find(|b| b.identifier() == "required_providers")
        .unwrap();
    let Expression::Object(cloudflare) = attribute(providers.body(), "cloudflare") else {
        panic!("required_providers.cloudflare is not an object");
    };
    let field = |name: &str| {
        cloudflare
            .iter()
            .find(|(k, _)| k.to_string() == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(
        field("source"),
        Some(Expression::from("cloudflare/cloudflare"))
    );
    assert_eq!(field("version"), Some(Expression::from("~> 5")));
}

#[test]
fn every_resource_is_there_with_its_v5_arguments() {
    let files = module();
    let room = resource(&files, "cloudflare_waiting_room").body();
    for key in [
        "zone_id",
        "name",
        "host",
        "path",
        "total_active_users",
        "new_users_per_minute",
        "session_duration",
        "disable_session_renewal",
        "queueing_method",
        "queueing_status_code",
        "queue_all",
        "suspended",
        "custom_page_html",
        "cookie_suffix",
        "cookie_attributes",
        "default_template_language",
        "enabled_origin_commands",
    ] {
        attribute(room, key);
    }
    assert_eq!(
        attribute(room, "json_response_enabled"),
        &Expression::Bool(true)
    );
    // v5: cookie_attributes is an object attribute, not a block.
    assert!(matches!(
        attribute(room, "cookie_attributes"),
        Expression::Object(_)
    ));
    assert_eq!(room.blocks().count(), 0, "no v4-style blocks in the room");

    let event = resource(&files, "cloudflare_waiting_room_event").body();
    let mut count_vars = BTreeSet::new();
    collect_vars(attribute(event, "count"), &mut count_vars);
    assert_eq!(count_vars, BTreeSet::from(["events".to_owned()]));
    for key in [
        "waiting_room_id",
        "name",
        "event_start_time",
        "event_end_time",
        "prequeue_start_time",
        "shuffle_at_event_start",
        "total_active_users",
        "new_users_per_minute",
    ] {
        attribute(event, key);
    }

    let rules = resource(&files, "cloudflare_waiting_room_rules").body();
    assert_eq!(rules.blocks().count(), 0, "v5 rules are a list, not blocks");
    let Expression::ForExpr(list) = attribute(rules, "rules") else {
        panic!("rules is not a list of objects");
    };
    let Expression::Object(rule) = &list.value_expr else {
        panic!("a rule is not an object");
    };
    let keys: BTreeSet<String> = rule.iter().map(|(k, _)| k.to_string()).collect();
    assert_eq!(
        keys,
        ["action", "description", "enabled", "expression"]
            .map(String::from)
            .into()
    );
    assert!(
        rule.iter().any(
            |(k, v)| k.to_string() == "action" && *v == Expression::from("bypass_waiting_room")
        )
    );

    let settings = resource(&files, "cloudflare_waiting_room_settings").body();
    attribute(settings, "search_engine_crawler_bypass");
}

#[test]
fn every_variable_used_is_declared_and_every_declared_one_is_used() {
    let files = module();
    let mut used = BTreeSet::new();
    for (_, body) in &files {
        collect_body_vars(body, &mut used);
    }
    let declared = declared(&files);
    let undeclared: Vec<_> = used.difference(&declared).collect();
    let unused: Vec<_> = declared.difference(&used).collect();
    assert!(
        undeclared.is_empty(),
        "used but not declared: {undeclared:?}"
    );
    assert!(unused.is_empty(), "declared but not used: {unused:?}");

    for variable in blocks(&files, "variable") {
        let keys: BTreeSet<&str> = variable.body().attributes().map(|a| a.key()).collect();
        assert!(keys.contains("description"), "{}", label(variable, 0));
        assert!(keys.contains("type"), "{}", label(variable, 0));
        for validation in variable
            .body()
            .blocks()
            .filter(|b| b.identifier() == "validation")
        {
            attribute(validation.body(), "condition");
            attribute(validation.body(), "error_message");
        }
    }
    let validated: BTreeSet<&str> = blocks(&files, "variable")
        .filter(|b| b.body().blocks().any(|v| v.identifier() == "validation"))
        .map(|b| label(b, 0))
        .collect();
    for name in [
        "zone_id",
        "room_name",
        "host",
        "path",
        "total_active_users",
        "new_users_per_minute",
        "session_duration",
        "queueing_method",
        "queueing_status_code",
        "default_template_language",
        "bypass_rules",
        "events",
    ] {
        assert!(validated.contains(name), "{name} has no validation block");
    }
}

#[test]
fn the_page_template_referenced_exists_and_compiles() {
    let files = module();
    let room = resource(&files, "cloudflare_waiting_room").body();
    let Expression::FuncCall(call) = attribute(room, "custom_page_html") else {
        panic!("custom_page_html is not file(...)");
    };
    assert_eq!(call.name.name.as_str(), "file");
    let Some(Expression::TemplateExpr(path)) = call.args.first() else {
        panic!("file() takes no path template");
    };
    let template = hcl::Template::from_expr(path).unwrap();
    let [Element::Interpolation(module), Element::Literal(relative)] = template.elements() else {
        panic!("file() does not take \"${{path.module}}/...\"");
    };
    assert_eq!(module.expr.to_string(), "path.module");
    let file = infra().join(relative.trim_start_matches('/'));
    let source =
        std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let (_, warnings) = CustomPage::compile(source).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn the_example_sets_declared_variables_and_every_required_one() {
    let files = module();
    let text = std::fs::read_to_string(infra().join("terraform.tfvars.example")).unwrap();
    let example = hcl::parse(&text).unwrap();
    let set: BTreeSet<String> = example.attributes().map(|a| a.key().to_owned()).collect();
    let declared = declared(&files);
    assert!(set.is_subset(&declared), "{:?}", set.difference(&declared));
    assert!(required(&files).is_subset(&set));
    assert_eq!(example.blocks().count(), 0);
}

fn export(config: &Path, out: &Path) -> (String, serde_json::Value) {
    let run = Command::new(env!("CARGO_BIN_EXE_waitroom-proxy"))
        .arg("export-terraform")
        .arg("--config")
        .arg(config)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{stderr}");
    assert!(run.stdout.is_empty());
    let text = std::fs::read_to_string(out).unwrap();
    let vars = hcl::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    (stderr, vars)
}

#[test]
fn export_terraform_carries_drop_toml() {
    let drop = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/drop.toml");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("room.auto.tfvars");
    let (stderr, vars) = export(&drop, &out);

    let file = ConfigFile::read(&drop).unwrap();
    let room = RoomSettings::from_section(&file.room).unwrap();
    assert_eq!(vars["room_name"], file.room.id);
    assert_eq!(vars["description"], room.name);
    assert_eq!(vars["path"], file.room.path);
    assert_eq!(vars["total_active_users"], room.total_active_users);
    assert_eq!(vars["new_users_per_minute"], room.new_users_per_minute);
    assert_eq!(
        vars["session_duration"],
        room.session_duration.as_secs() / 60
    );
    assert_eq!(
        vars["disable_session_renewal"],
        room.disable_session_renewal
    );
    assert_eq!(vars["queueing_method"], room.queueing_method.as_str());
    assert_eq!(vars["queueing_status_code"], room.queueing_status_code);
    assert_eq!(vars["queue_all"], room.queue_all);
    assert_eq!(vars["suspended"], room.suspended);
    assert_eq!(
        vars["default_template_language"],
        file.page.default_template_language
    );
    assert_eq!(
        vars["enabled_origin_commands"],
        serde_json::json!(file.room.enabled_origin_commands)
    );
    let rules = vars["bypass_rules"].as_array().unwrap();
    assert_eq!(rules.len(), room.bypass.len());
    for (rule, pattern) in rules.iter().zip(&room.bypass) {
        assert_eq!(rule["expression"], bypass_expression(pattern));
    }
    assert_eq!(vars["events"], serde_json::json!([]));

    // Only variables the module declares; every one it needs but zone_id (and host, which
    // drop.toml leaves out).
    let files = module();
    let set: BTreeSet<String> = vars.as_object().unwrap().keys().cloned().collect();
    let declared = declared(&files);
    assert!(set.is_subset(&declared), "{:?}", set.difference(&declared));
    let missing: BTreeSet<String> = required(&files).difference(&set).cloned().collect();
    assert_eq!(missing, ["host", "zone_id"].map(String::from).into());

    // What Cloudflare cannot express, on stderr.
    for needle in [
        "new_users_per_minute = 40",
        "minimum is 200",
        "room.host is not set",
        "room.claim_window",
        "exact positions",
    ] {
        assert!(stderr.contains(needle), "{needle} not in {stderr}");
    }
}

#[test]
fn export_terraform_refuses_a_bad_config_and_the_old_usage_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[origin]\naddress = \"127.0.0.1:1\"\n[room]\nid = \"r\"\ntotal_active_users = 1\n\
         new_users_per_minute = 1\nsession_duration = \"soon\"\n",
    )
    .unwrap();
    let bin = env!("CARGO_BIN_EXE_waitroom-proxy");
    let run = Command::new(bin)
        .args(["export-terraform", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("room.session_duration"));

    let to_stdout = Command::new(bin)
        .args(["export-terraform", "-c"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo.toml"))
        .output()
        .unwrap();
    assert!(to_stdout.status.success());
    let text = String::from_utf8_lossy(&to_stdout.stdout);
    hcl::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));

    let neither = Command::new(bin).output().unwrap();
    assert_eq!(neither.status.code(), Some(2), "--config is required");
    let both = Command::new(bin)
        .args(["--test", "export-terraform", "--config", "x"])
        .output()
        .unwrap();
    assert_eq!(both.status.code(), Some(2));
}
