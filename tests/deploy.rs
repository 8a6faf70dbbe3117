#![allow(clippy::unwrap_used)]
//! The deploy files agree with the code and with config/: nothing here runs a container, so
//! these tests read the files and check what would otherwise only fail in production: ports,
//! paths, environment names, probes, selectors, and every metric the dashboard and the alert
//! rules use.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use serde_yaml::Value;
use waitroom::config::model::{
    Backend, ENV_ADMIN_TOKEN, ENV_JWT_SECRET, ENV_REDIS_URL, ENV_RUNTIME_DIRECTORY, Environment,
    PID_FILE_NAME, UPGRADE_SOCKET_NAME,
};
use waitroom::config::{Config, ConfigError};

const SECRET: &str = "0123456789abcdef0123456789abcdef-secret";

struct Env(HashMap<String, String>);

impl Environment for Env {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
}

fn env(pairs: &[(&str, &str)]) -> Env {
    Env(pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect())
}

fn secrets() -> Env {
    env(&[(ENV_JWT_SECRET, SECRET), (ENV_ADMIN_TOKEN, SECRET)])
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn documents(path: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(&read(path))
        .map(|doc| Value::deserialize(doc).unwrap_or_else(|e| panic!("{path}: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

fn number(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v:?}"))
}

/// Every Kubernetes object of deploy/kubernetes, through its kustomization.
struct Manifests {
    objects: Vec<Value>,
}

impl Manifests {
    fn load() -> Self {
        let kustomization = documents("deploy/kubernetes/kustomization.yaml").remove(0);
        let listed: BTreeSet<String> = kustomization["resources"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|r| text(r).to_owned())
            .collect();
        let present: BTreeSet<String> = std::fs::read_dir(repo("deploy/kubernetes"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".yaml") && name != "kustomization.yaml")
            .collect();
        assert_eq!(listed, present, "the kustomization lists every manifest");
        let objects = listed
            .iter()
            .flat_map(|file| documents(&format!("deploy/kubernetes/{file}")))
            .collect();
        Self { objects }
    }

    fn get(&self, kind: &str, name: &str) -> &Value {
        self.objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no {kind} {name}"))
    }

    fn proxy(&self) -> &Value {
        self.get("Deployment", "waitroom")
    }

    fn container(&self) -> &Value {
        let containers = self.proxy()["spec"]["template"]["spec"]["containers"]
            .as_sequence()
            .unwrap();
        containers.iter().find(|c| c["name"] == "waitroom").unwrap()
    }

    /// The ConfigMap's drop.toml, validated by the proxy's own config code.
    fn config(&self) -> Config {
        let toml = text(&self.get("ConfigMap", "waitroom-config")["data"]["drop.toml"]);
        Config::parse(toml, &secrets(), false)
            .unwrap_or_else(|e| panic!("the ConfigMap's drop.toml: {e}"))
            .0
    }
}

fn container_port(container: &Value, name: &str) -> u64 {
    let ports = container["ports"].as_sequence().unwrap();
    number(
        &ports
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no container port {name}"))["containerPort"],
    )
}

/// A probe's or Service's port: a number, or the name of a container port.
fn resolve_port(container: &Value, port: &Value) -> u64 {
    port.as_u64()
        .unwrap_or_else(|| container_port(container, text(port)))
}

fn labels(v: &Value) -> BTreeMap<String, String> {
    v.as_mapping()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (text(k).to_owned(), text(v).to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn selects(selector: &Value, target: &Value) -> bool {
    let (selector, target) = (labels(selector), labels(target));
    !selector.is_empty() && selector.iter().all(|(k, v)| target.get(k) == Some(v))
}

fn duration_secs(text: &str) -> u64 {
    humantime::parse_duration(text).unwrap().as_secs()
}

#[test]
fn the_configmap_is_a_valid_redis_room_and_the_deployment_matches_it() {
    let k = Manifests::load();
    let config = k.config();
    let c = k.container();
    let pod = &k.proxy()["spec"]["template"]["spec"];

    assert!(number(&k.proxy()["spec"]["replicas"]) >= 2);
    assert!(
        matches!(config.store.backend, Backend::Redis { .. }),
        "replicas share one room through Redis"
    );
    // Reachable from outside the pod: the Service, the kubelet, Prometheus.
    assert!(config.listen.ip().is_unspecified());
    assert!(config.admin_address.ip().is_unspecified());
    assert_eq!(
        container_port(c, "http"),
        u64::from(config.listen.port()),
        "container port http = listen.address"
    );
    assert_eq!(
        container_port(c, "admin"),
        u64::from(config.admin_address.port())
    );
    assert!(config.tls.is_none(), "TLS ends at the Ingress");
    assert!(config.pass.cookie_secure);

    // --config points at the ConfigMap's key where the volume mounts it.
    let args: Vec<&str> = c["args"].as_sequence().unwrap().iter().map(text).collect();
    let at = args.iter().position(|a| *a == "--config").unwrap();
    let path = Path::new(args[at + 1]);
    let mount = c["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| Path::new(text(&m["mountPath"])) == path.parent().unwrap())
        .expect("a volume mounted where --config points");
    let volume = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    assert_eq!(volume["configMap"]["name"], "waitroom-config");
    let file_name = path.file_name().unwrap().to_str().unwrap();
    assert!(
        !k.get("ConfigMap", "waitroom-config")["data"][file_name].is_null(),
        "the ConfigMap has {file_name}"
    );

    // Readiness and liveness on the admin port, on the paths the admin listener serves.
    let admin_port = u64::from(config.admin_address.port());
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(resolve_port(c, &get["port"]), admin_port, "{probe}");
    }

    // Long enough for preStop, the grace period and Pingora's shutdown timeout.
    let pre_stop = c["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_u64()
        .unwrap_or(0);
    let grace = config.grace_period.as_secs();
    assert!(
        number(&pod["terminationGracePeriodSeconds"]) > pre_stop + grace + grace.max(1),
        "terminationGracePeriodSeconds too short"
    );

    let requests = &c["resources"]["requests"];
    assert!(requests["cpu"].is_string() && requests["memory"].is_string());
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
}

/// Redis' requirepass in the Secret, expanded into WR_REDIS_URL by Kubernetes.
const REDIS_PASSWORD: &str = "REDIS_PASSWORD";

/// `name -> (secret key or None, literal value or None)` of a container's env, in order.
fn env_vars(container: &Value) -> Vec<(String, Option<String>, Option<String>)> {
    container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|var| {
            let reference = &var["valueFrom"]["secretKeyRef"];
            let key = (!reference.is_null()).then(|| {
                assert_eq!(reference["name"], "waitroom-secrets", "{var:?}");
                text(&reference["key"]).to_owned()
            });
            (
                text(&var["name"]).to_owned(),
                key,
                var["value"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

/// `KEY=value` lines of an env file, comments and blank lines left out.
fn env_file(path: &str) -> BTreeMap<String, String> {
    read(path)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap_or_else(|| panic!("{path}: {l}"));
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

#[test]
fn secrets_come_from_a_git_ignored_env_file_and_nothing_runs_on_placeholders() {
    let k = Manifests::load();
    // No Secret object is applied from the repository: kustomize makes it from secrets.env.
    assert!(
        k.objects.iter().all(|o| o["kind"] != "Secret"),
        "a Secret with placeholder values is among the resources"
    );
    let kustomization = documents("deploy/kubernetes/kustomization.yaml").remove(0);
    let generators = kustomization["secretGenerator"].as_sequence().unwrap();
    assert_eq!(generators.len(), 1);
    assert_eq!(generators[0]["name"], "waitroom-secrets");
    let envs: Vec<&str> = generators[0]["envs"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(text)
        .collect();
    assert_eq!(envs, ["secrets.env"]);
    // Kept out of git and out of the image's build context.
    assert!(
        read(".gitignore")
            .lines()
            .any(|l| l.trim() == "/deploy/kubernetes/secrets.env")
    );
    assert!(
        read(".dockerignore")
            .lines()
            .any(|l| l.trim() == "deploy/kubernetes/secrets.env")
    );

    // The example names exactly the keys the pods read, and holds no value to run on.
    let example = env_file("deploy/kubernetes/secrets.env.example");
    let proxy_env = env_vars(k.container());
    let redis_container =
        &k.get("Deployment", "waitroom-redis")["spec"]["template"]["spec"]["containers"][0];
    let redis_env = env_vars(redis_container);
    let referenced: BTreeSet<String> = proxy_env
        .iter()
        .chain(&redis_env)
        .filter_map(|(_, key, _)| key.clone())
        .collect();
    assert_eq!(
        referenced,
        example.keys().cloned().collect::<BTreeSet<_>>(),
        "secrets.env.example and the secretKeyRefs"
    );
    let from_secret: BTreeSet<String> = proxy_env
        .iter()
        .filter(|(_, key, _)| key.is_some())
        .map(|(name, _, _)| name.clone())
        .collect();
    assert_eq!(
        from_secret,
        BTreeSet::from([
            ENV_JWT_SECRET.to_owned(),
            ENV_ADMIN_TOKEN.to_owned(),
            REDIS_PASSWORD.to_owned()
        ])
    );
    assert!(example.values().all(String::is_empty), "{example:?}");
    // Applied as the example stands, the proxy refuses to start instead of running on it.
    let placeholders = env(&[
        (ENV_JWT_SECRET, example[ENV_JWT_SECRET].as_str()),
        (ENV_ADMIN_TOKEN, example[ENV_ADMIN_TOKEN].as_str()),
    ]);
    let toml = text(&k.get("ConfigMap", "waitroom-config")["data"]["drop.toml"]);
    // Every error is reported; the pass secret's first.
    match Config::parse(toml, &placeholders, false).map_err(|e| e.into_list().remove(0)) {
        Err(ConfigError::Invalid { key, .. }) => assert_eq!(key, "pass.secret"),
        other => panic!("the example's secrets were accepted: {:?}", other.is_ok()),
    }
}

#[test]
fn redis_asks_for_a_password_and_the_proxy_sends_it_in_wr_redis_url() {
    let k = Manifests::load();
    let config = k.config();
    let redis_container =
        &k.get("Deployment", "waitroom-redis")["spec"]["template"]["spec"]["containers"][0];
    let redis_env = env_vars(redis_container);
    assert!(
        redis_env
            .iter()
            .any(|(name, key, _)| name == REDIS_PASSWORD && key.as_deref() == Some(REDIS_PASSWORD))
    );
    let args: Vec<&str> = redis_container["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(text)
        .collect();
    let at = args.iter().position(|a| *a == "--requirepass").unwrap();
    assert_eq!(args[at + 1], format!("$({REDIS_PASSWORD})"));

    // The proxy: REDIS_PASSWORD from the Secret, then WR_REDIS_URL built from it (Kubernetes
    // expands $(VAR) only for variables defined earlier in the list).
    let proxy_env = env_vars(k.container());
    let position = |name: &str| proxy_env.iter().position(|(n, _, _)| n == name).unwrap();
    assert!(position(REDIS_PASSWORD) < position(ENV_REDIS_URL));
    let url = proxy_env[position(ENV_REDIS_URL)].2.clone().unwrap();
    let rest = url
        .strip_prefix(&format!("redis://:$({REDIS_PASSWORD})@"))
        .unwrap_or_else(|| panic!("{url} carries no password"));
    // The same Redis and database as the ConfigMap's store.url, which it replaces.
    let Backend::Redis { url: file_url } = &config.store.backend else {
        panic!("not redis")
    };
    assert_eq!(rest, file_url.trim_start_matches("redis://"));

    // Given the expanded variable, the proxy connects with it, and never prints the password.
    let toml = text(&k.get("ConfigMap", "waitroom-config")["data"]["drop.toml"]);
    let expanded = url.replace(&format!("$({REDIS_PASSWORD})"), "pw-from-the-secret");
    let mut with_url = secrets();
    with_url.0.insert(ENV_REDIS_URL.into(), expanded.clone());
    let (config, warnings) = Config::parse(toml, &with_url, false).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.store.backend, Backend::Redis { url: expanded });
    let printed = config.masked_toml();
    assert!(!printed.contains("pw-from-the-secret"), "{printed}");
    assert!(printed.contains("url = \"redis://:****@waitroom-redis:6379/0\""));
}

#[test]
fn the_network_policies_open_each_port_to_whom_it_serves() {
    let k = Manifests::load();
    let config = k.config();
    let c = k.container();
    let proxy_pod = &k.proxy()["spec"]["template"]["metadata"]["labels"];
    let redis_deployment = k.get("Deployment", "waitroom-redis");
    let redis_pod = &redis_deployment["spec"]["template"]["metadata"]["labels"];
    let redis_container = &redis_deployment["spec"]["template"]["spec"]["containers"][0];

    let policy = k.get("NetworkPolicy", "waitroom-proxy");
    let spec = &policy["spec"];
    assert!(selects(&spec["podSelector"]["matchLabels"], proxy_pod));
    assert!(!selects(&spec["podSelector"]["matchLabels"], redis_pod));
    assert_eq!(
        spec["policyTypes"],
        serde_yaml::from_str::<Value>("[Ingress]").unwrap()
    );
    let rules = spec["ingress"].as_sequence().unwrap();
    assert_eq!(rules.len(), 2);
    let port_of = |rule: &Value, container: &Value| -> u64 {
        let ports = rule["ports"].as_sequence().unwrap();
        assert_eq!(ports.len(), 1, "{rule:?}");
        assert_eq!(ports[0]["protocol"], "TCP");
        resolve_port(container, &ports[0]["port"])
    };
    let public = rules
        .iter()
        .find(|r| port_of(r, c) == u64::from(config.listen.port()))
        .expect("a rule for the public port");
    assert!(
        public["from"].is_null(),
        "the public port is open to anyone"
    );
    let admin = rules
        .iter()
        .find(|r| port_of(r, c) == u64::from(config.admin_address.port()))
        .expect("a rule for the admin port");
    let from = admin["from"].as_sequence().unwrap();
    assert_eq!(from.len(), 1);
    assert!(
        from[0]["podSelector"].is_null() && from[0]["ipBlock"].is_null(),
        "the admin port: namespaces picked by label, nothing else"
    );
    let namespaces = labels(&from[0]["namespaceSelector"]["matchLabels"]);
    assert_eq!(
        namespaces
            .get("kubernetes.io/metadata.name")
            .map(String::as_str),
        Some("monitoring")
    );

    let policy = k.get("NetworkPolicy", "waitroom-redis");
    let spec = &policy["spec"];
    assert!(selects(&spec["podSelector"]["matchLabels"], redis_pod));
    assert!(!selects(&spec["podSelector"]["matchLabels"], proxy_pod));
    let rules = spec["ingress"].as_sequence().unwrap();
    assert_eq!(rules.len(), 1);
    let redis_service = k.get("Service", "waitroom-redis");
    assert_eq!(
        port_of(&rules[0], redis_container),
        resolve_port(
            redis_container,
            &redis_service["spec"]["ports"][0]["targetPort"]
        )
    );
    let from = rules[0]["from"].as_sequence().unwrap();
    assert_eq!(from.len(), 1);
    assert!(from[0]["namespaceSelector"].is_null() && from[0]["ipBlock"].is_null());
    assert!(selects(&from[0]["podSelector"]["matchLabels"], proxy_pod));
    assert!(!selects(&from[0]["podSelector"]["matchLabels"], redis_pod));
}

#[test]
fn third_party_images_are_pinned_by_digest() {
    let pinned = |image: &str| {
        image
            .split_once("@sha256:")
            .is_some_and(|(_, d)| d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    for (op, args) in dockerfile() {
        if op == "FROM" {
            let image = args.split_whitespace().next().unwrap();
            assert!(pinned(image), "FROM {image}");
        }
    }
    let k = Manifests::load();
    let redis = &k.get("Deployment", "waitroom-redis")["spec"]["template"]["spec"]["containers"][0];
    assert!(pinned(text(&redis["image"])), "{:?}", redis["image"]);
}

#[test]
fn services_the_budget_and_the_servicemonitor_select_what_they_should() {
    let k = Manifests::load();
    let config = k.config();
    let pod_labels = &k.proxy()["spec"]["template"]["metadata"]["labels"];
    assert!(selects(
        &k.proxy()["spec"]["selector"]["matchLabels"],
        pod_labels
    ));
    let c = k.container();

    let public = k.get("Service", "waitroom");
    assert!(selects(&public["spec"]["selector"], pod_labels));
    let ports = public["spec"]["ports"].as_sequence().unwrap();
    assert_eq!(
        ports.len(),
        1,
        "the admin port stays off the public Service"
    );
    assert_eq!(
        resolve_port(c, &ports[0]["targetPort"]),
        u64::from(config.listen.port())
    );

    let admin = k.get("Service", "waitroom-admin");
    assert!(selects(&admin["spec"]["selector"], pod_labels));
    let admin_port = &admin["spec"]["ports"][0];
    assert_eq!(
        resolve_port(c, &admin_port["targetPort"]),
        u64::from(config.admin_address.port())
    );

    let monitor = k.get("ServiceMonitor", "waitroom");
    assert!(selects(
        &monitor["spec"]["selector"]["matchLabels"],
        &admin["metadata"]["labels"]
    ));
    assert!(
        !selects(
            &monitor["spec"]["selector"]["matchLabels"],
            &public["metadata"]["labels"]
        ),
        "metrics are scraped once per pod, not twice"
    );
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], admin_port["name"]);
    assert_eq!(endpoint["path"], "/metrics");

    let pdb = k.get("PodDisruptionBudget", "waitroom");
    assert!(selects(&pdb["spec"]["selector"]["matchLabels"], pod_labels));
    assert!(number(&pdb["spec"]["minAvailable"]) < number(&k.proxy()["spec"]["replicas"]));

    // store.url names the Redis Service and its port.
    let Backend::Redis { url } = &config.store.backend else {
        panic!("not redis")
    };
    let host_port = url
        .trim_start_matches("redis://")
        .split('/')
        .next()
        .unwrap();
    let redis = k.get("Service", "waitroom-redis");
    assert_eq!(
        host_port,
        format!(
            "{}:{}",
            text(&redis["metadata"]["name"]),
            number(&redis["spec"]["ports"][0]["port"])
        )
    );
    let redis_pod = &k.get("Deployment", "waitroom-redis")["spec"]["template"]["metadata"];
    assert!(selects(&redis["spec"]["selector"], &redis_pod["labels"]));
    assert!(
        !selects(&public["spec"]["selector"], &redis_pod["labels"]),
        "Redis is not behind the public Service"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probed_and_scraped_paths_are_served_by_the_admin_listener() {
    let k = Manifests::load();
    let c = k.container();
    let monitor = k.get("ServiceMonitor", "waitroom");
    let paths = [
        text(&c["readinessProbe"]["httpGet"]["path"]).to_owned(),
        text(&c["livenessProbe"]["httpGet"]["path"]).to_owned(),
        text(&monitor["spec"]["endpoints"][0]["path"]).to_owned(),
    ];
    let proxy = common::proxy::TestProxy::start("total_active_users = 1\nnew_users_per_minute = 1");
    for path in paths {
        let answer = reqwest::get(format!("{}{path}", proxy.admin))
            .await
            .unwrap();
        assert_eq!(answer.status(), 200, "{path}");
    }
}

/// Dockerfile instructions, continuation lines joined: (instruction, arguments).
fn dockerfile() -> Vec<(String, String)> {
    let text = read("deploy/Dockerfile").replace("\\\n", " ");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (op, rest) = l.split_once(' ').unwrap_or((l, ""));
            (op.to_ascii_uppercase(), rest.trim().to_owned())
        })
        .collect()
}

fn bin_name() -> String {
    let cargo: toml::Value = toml::from_str(&read("Cargo.toml")).unwrap();
    cargo["bin"][0]["name"].as_str().unwrap().to_owned()
}

#[test]
fn the_dockerfile_builds_in_one_stage_and_runs_unprivileged_in_another() {
    let steps = dockerfile();
    let froms: Vec<usize> = steps
        .iter()
        .enumerate()
        .filter(|(_, (op, _))| op == "FROM")
        .map(|(i, _)| i)
        .collect();
    assert!(froms.len() >= 2, "multi-stage");
    let build = &steps[froms[0]..froms[froms.len() - 1]];
    let runtime = &steps[froms[froms.len() - 1]..];
    assert!(
        build
            .iter()
            .any(|(op, args)| op == "RUN" && args.contains("install") && args.contains("cmake")),
        "pingora-core needs cmake to build"
    );
    assert!(
        build.iter().any(|(op, args)| op == "RUN"
            && args.contains("--locked")
            && args.contains("--release"))
    );

    let bin = bin_name();
    let copied_to = runtime
        .iter()
        .find(|(op, args)| op == "COPY" && args.contains("--from=") && args.contains(&bin))
        .map(|(_, args)| args.split_whitespace().last().unwrap().to_owned())
        .expect("the binary is copied into the runtime stage");
    let entrypoint: Vec<String> = runtime
        .iter()
        .find(|(op, _)| op == "ENTRYPOINT")
        .map(|(_, args)| serde_json::from_str(args).unwrap())
        .unwrap();
    assert_eq!(entrypoint, [copied_to]);

    let user = &runtime.iter().rfind(|(op, _)| op == "USER").unwrap().1;
    let uid: u64 = user.split(':').next().unwrap().parse().unwrap();
    assert_ne!(uid, 0, "not root");
    let k = Manifests::load();
    assert_eq!(
        number(&k.proxy()["spec"]["template"]["spec"]["securityContext"]["runAsUser"]),
        uid,
        "the pod runs as the image's user"
    );

    // EXPOSE names exactly the ports the image's own config listens on from outside the
    // container (its admin listener stays on loopback unless a mounted config says otherwise).
    let image_config = runtime
        .iter()
        .find(|(op, args)| op == "COPY" && args.ends_with("/etc/waitroom/drop.toml"))
        .map(|(_, args)| args.split_whitespace().next().unwrap().to_owned())
        .expect("the image carries a drop.toml");
    let (own, _) = Config::load(&repo(&image_config), &secrets(), false).unwrap();
    let reachable: BTreeSet<u64> = [own.listen, own.admin_address]
        .iter()
        .filter(|a| a.ip().is_unspecified())
        .map(|a| u64::from(a.port()))
        .collect();
    let exposed: BTreeSet<u64> = runtime
        .iter()
        .filter(|(op, _)| op == "EXPOSE")
        .flat_map(|(_, args)| args.split_whitespace().map(|p| p.parse::<u64>().unwrap()))
        .collect();
    assert_eq!(exposed, reachable);
    assert!(!exposed.contains(&u64::from(own.admin_address.port())));
    // The image's default command reads the file the Deployment mounts.
    let cmd: Vec<String> = runtime
        .iter()
        .find(|(op, _)| op == "CMD")
        .map(|(_, args)| serde_json::from_str(args).unwrap())
        .unwrap();
    let deployment_args: Vec<&str> = k.container()["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(text)
        .collect();
    assert_eq!(cmd, deployment_args);
    let dockerignore = read(".dockerignore");
    let ignored: BTreeSet<&str> = dockerignore.lines().map(str::trim).collect();
    for path in ["target/", "e2e/node_modules/"] {
        assert!(ignored.contains(path), ".dockerignore lacks {path}");
    }
}

/// `key -> values` of one section of a systemd unit.
fn unit_section(text: &str, section: &str) -> HashMap<String, Vec<String>> {
    let mut keys: HashMap<String, Vec<String>> = HashMap::new();
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == format!("[{section}]");
            continue;
        }
        if !inside || line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line.split_once('=').unwrap();
        keys.entry(key.to_owned())
            .or_default()
            .push(value.to_owned());
    }
    keys
}

/// The system calls of a `SystemCallFilter=` group, nested groups expanded, as this machine's
/// systemd knows them; None without `systemd-analyze`.
fn syscalls_of(group: &str) -> Option<BTreeSet<String>> {
    let out = Command::new("systemd-analyze")
        .args(["syscall-filter", group])
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "systemd-analyze syscall-filter {group}"
    );
    let mut calls = BTreeSet::new();
    // The first line names the group itself.
    for line in String::from_utf8(out.stdout).unwrap().lines().skip(1) {
        let name = line.trim();
        if name.is_empty() || name.starts_with('#') {
            continue;
        }
        if name.starts_with('@') {
            calls.extend(syscalls_of(name)?);
        } else {
            calls.insert(name.to_owned());
        }
    }
    Some(calls)
}

#[test]
fn the_systemd_units_system_call_filter_lets_the_proxy_raise_its_open_file_limit() {
    let unit = read("deploy/systemd/waitroom.service");
    let service = unit_section(&unit, "Service");
    let filters = service
        .get("SystemCallFilter")
        .expect("a system-call filter");
    let (mut allowed, mut denied) = (BTreeSet::new(), BTreeSet::new());
    for line in filters {
        let (set, names) = match line.strip_prefix('~') {
            Some(names) => (&mut denied, names),
            None => (&mut allowed, line.as_str()),
        };
        for name in names.split_whitespace() {
            let Some(calls) = (if name.starts_with('@') {
                syscalls_of(name)
            } else {
                Some(BTreeSet::from([name.to_owned()]))
            }) else {
                eprintln!("no systemd-analyze here: the filter is not resolved");
                return;
            };
            set.extend(calls);
        }
    }
    // glibc's setrlimit() is the prlimit64 system call (strace shows it): that is the one the
    // start's raise of the open-file limit needs.
    assert!(allowed.contains("prlimit64"), "prlimit64 not allowed");
    assert!(!denied.contains("prlimit64"), "prlimit64 denied again");
}

#[test]
fn the_systemd_unit_is_hardened_and_agrees_with_the_binary() {
    let unit = read("deploy/systemd/waitroom.service");
    let service = unit_section(&unit, "Service");
    let one = |key: &str| -> &str {
        let values = service
            .get(key)
            .unwrap_or_else(|| panic!("[Service] {key} is missing"));
        values.last().unwrap()
    };
    for (key, value) in [
        ("DynamicUser", "yes"),
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("PrivateDevices", "yes"),
        ("RestrictSUIDSGID", "yes"),
        ("KillSignal", "SIGTERM"),
    ] {
        assert_eq!(one(key), value, "{key}");
    }
    assert!(
        one("CapabilityBoundingSet")
            .split_whitespace()
            .all(|c| c == "CAP_NET_BIND_SERVICE")
    );

    let start: Vec<&str> = one("ExecStart").split_whitespace().collect();
    assert_eq!(
        Path::new(start[0]).file_name().unwrap().to_str(),
        Some(bin_name().as_str())
    );
    assert_eq!(start[1], "--config");
    let pre: Vec<&str> = one("ExecStartPre").split_whitespace().collect();
    assert_eq!(
        pre,
        [&start[..], &["--test"]].concat(),
        "checked before start"
    );
    assert!(one("ExecReload").contains("-HUP") && one("ExecReload").contains("$MAINPID"));

    // The env file carries exactly the secrets the code reads (and the log level).
    assert!(one("EnvironmentFile").starts_with("/etc/"));
    let example = read("deploy/systemd/waitroom.env.example");
    let names: BTreeSet<&str> = example
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split_once('=').unwrap().0)
        .collect();
    assert_eq!(
        names,
        BTreeSet::from([ENV_JWT_SECRET, ENV_ADMIN_TOKEN, ENV_REDIS_URL, "RUST_LOG"])
    );

    // Under RuntimeDirectory=, the shipped drop.toml hands over through that directory and
    // writes the pid file PIDFile= names.
    let runtime_dir = Path::new("/run").join(one("RuntimeDirectory"));
    let mut with_runtime = secrets();
    with_runtime.0.insert(
        ENV_RUNTIME_DIRECTORY.into(),
        runtime_dir.display().to_string(),
    );
    let (config, _) = Config::load(&repo("config/drop.toml"), &with_runtime, false).unwrap();
    assert_eq!(config.pid_file.as_deref(), Some(Path::new(one("PIDFile"))));
    assert_eq!(config.pid_file, Some(runtime_dir.join(PID_FILE_NAME)));
    assert_eq!(
        config.upgrade_socket,
        Some(runtime_dir.join(UPGRADE_SOCKET_NAME))
    );
    // Stopping waits for the grace period and Pingora's shutdown timeout.
    let grace = config.grace_period.as_secs();
    assert!(duration_secs(one("TimeoutStopSec")) > grace + grace.max(1));
}

/// The proxy's metrics named in a PromQL expression (`waitroom_*`, and the process collector's).
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = metric_names_with(expr, "waitroom_");
    names.extend(metric_names_with(expr, "process_"));
    names
}

fn metric_names_with(expr: &str, prefix: &str) -> Vec<String> {
    let mut names = Vec::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while let Some(at) = expr[i..].find(prefix) {
        let start = i + at;
        let end = expr[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(expr.len(), |n| start + n);
        let preceded =
            start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        if !preceded {
            names.push(expr[start..end].to_owned());
        }
        i = end;
    }
    names
}

/// Checks one PromQL expression: its metrics are exported, its label values exist.
fn check_expr(expr: &str, used: &mut BTreeSet<String>) {
    let names = metric_names(expr);
    assert!(!names.is_empty(), "no waitroom metric in {expr}");
    for name in names {
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|suffix| {
                name.strip_suffix(suffix)
                    .filter(|b| waitroom::observe::HISTOGRAMS.contains(b))
            })
            .unwrap_or(&name);
        assert!(
            waitroom::observe::NAMES.contains(&base)
                || waitroom::observe::PROCESS_NAMES.contains(&base),
            "{name} is not exported by the proxy (in {expr})"
        );
        used.insert(base.to_owned());
    }
    // Requests' outcomes, then Turnstile answers' (both label their series `outcome`).
    let outcomes = [
        "passed",
        "admitted",
        "queued",
        "bypassed",
        "rejected",
        "unprotected",
        "limited",
        "challenged",
        "failed",
        "unreachable",
        "malformed",
    ];
    for (label, allowed) in [
        ("outcome", &outcomes[..]),
        ("kind", &waitroom::observe::UPSTREAM_ERROR_KINDS),
        ("class", &waitroom::observe::ORIGIN_CLASSES),
    ] {
        let needle = format!("{label}=\"");
        let mut rest = expr;
        while let Some(at) = rest.find(&needle) {
            let value = &rest[at + needle.len()..];
            let value = &value[..value.find('"').unwrap()];
            assert!(allowed.contains(&value), "{label}={value:?} in {expr}");
            rest = &rest[at + needle.len()..];
        }
    }
    assert_eq!(
        expr.matches('(').count(),
        expr.matches(')').count(),
        "unbalanced: {expr}"
    );
}

#[test]
fn outcome_labels_in_the_checks_are_the_proxys() {
    use waitroom::observe::Outcome;
    let labels: Vec<&str> = [
        Outcome::Passed,
        Outcome::Admitted,
        Outcome::Queued,
        Outcome::Bypassed,
        Outcome::Rejected,
        Outcome::Unprotected,
        Outcome::Limited,
    ]
    .iter()
    .map(|o| o.label())
    .collect();
    assert_eq!(
        labels,
        [
            "passed",
            "admitted",
            "queued",
            "bypassed",
            "rejected",
            "unprotected",
            "limited"
        ]
    );
}

#[test]
fn every_metric_in_the_dashboard_is_exported_and_the_room_is_covered() {
    let dashboard: serde_json::Value =
        serde_json::from_str(&read("deploy/grafana/waitroom-dashboard.json")).unwrap();
    let mut used = BTreeSet::new();
    let mut ids = BTreeSet::new();
    let mut titles = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        assert!(
            ids.insert(panel["id"].as_u64().unwrap()),
            "duplicate panel id"
        );
        titles.push(panel["title"].as_str().unwrap().to_owned());
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            check_expr(expr, &mut used);
            check_dashboard_expr(expr);
            // Several rooms picked at once: every line says which room it is (the process
            // metrics describe the process, which serves every room).
            let legend = target["legendFormat"].as_str().unwrap_or_default();
            if metric_names(expr)
                .iter()
                .all(|name| describes_the_process(name))
            {
                assert!(
                    legend.contains("{{instance}}"),
                    "legend {legend:?} of {expr}"
                );
                continue;
            }
            assert!(legend.contains("{{room}}"), "legend {legend:?} of {expr}");
            assert!(
                expr.contains("by (room") || expr.contains("by (le, room"),
                "not per room: {expr}"
            );
        }
    }
    // What an operator watches during a drop.
    for needed in [
        "waitroom_occupancy",
        "waitroom_capacity",
        "waitroom_queue_length",
        "waitroom_admitted_total",
        "waitroom_rate_per_minute",
        "waitroom_wait_seconds",
        "waitroom_requests_total",
        "waitroom_tickets_refused_total",
        "waitroom_origin_seconds",
        "waitroom_origin_responses_total",
        "waitroom_upstream_errors_total",
        "waitroom_leader",
        "waitroom_store_up",
        "waitroom_store_errors_total",
        "waitroom_prequeueing",
        "waitroom_order_tau",
        "waitroom_turnstile_verifications_total",
        "waitroom_turnstile_parked_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_cpu_seconds_total",
    ] {
        assert!(
            used.contains(needed),
            "the dashboard does not show {needed}"
        );
    }
    let variables = dashboard["templating"]["list"].as_array().unwrap();
    let variable = |name: &str| {
        variables
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no variable {name}"))
    };
    variable("datasource");
    // One room, several, or all of them.
    let room = variable("room");
    assert_eq!(room["multi"], true);
    assert_eq!(room["includeAll"], true);
    let all = room["allValue"].as_str().unwrap();
    assert!(all == ".+" || all == ".*", "allValue {all:?} is a regex");
    let query = room["definition"].as_str().unwrap();
    assert!(query.starts_with("label_values(waitroom_") && query.ends_with(", room)"));
}

/// A dashboard query: every rate() and increase() over Grafana's `$__rate_interval` (a fixed
/// window shows nothing when it is shorter than two scrapes, and hides spikes when longer), and
/// every metric filtered by the `room` variable.
fn check_dashboard_expr(expr: &str) {
    for function in ["rate(", "increase(", "delta("] {
        let mut rest = expr;
        while let Some(at) = rest.find(function) {
            let preceded = rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            rest = &rest[at + function.len()..];
            if preceded {
                continue; // irate( is not rate(
            }
            let close = rest.find(')').unwrap();
            let window = &rest[..close];
            assert!(
                window.ends_with("[$__rate_interval]"),
                "{function}) without [$__rate_interval]: {expr}"
            );
        }
    }
    // The process metrics describe the process, which serves every room: no room label.
    for name in metric_names(expr)
        .into_iter()
        .filter(|n| !describes_the_process(n))
    {
        let at = expr.find(&name).unwrap() + name.len();
        let selector = &expr[at..];
        assert!(
            selector.starts_with("{room=~\"$room\""),
            "{name} is not filtered by the room variable in {expr}"
        );
    }
}

#[test]
fn every_alert_uses_exported_metrics_and_the_operator_copy_is_identical() {
    let rules = documents("deploy/prometheus/alerts.yaml").remove(0);
    let anchors = runbook_anchors();
    let mut used = BTreeSet::new();
    let mut alerts = BTreeSet::new();
    for group in rules["groups"].as_sequence().unwrap() {
        for rule in group["rules"].as_sequence().unwrap() {
            let name = text(&rule["alert"]).to_owned();
            check_expr(text(&rule["expr"]), &mut used);
            assert!(rule["for"].is_string(), "{name}: for");
            let severity = text(&rule["labels"]["severity"]);
            assert!(["warning", "critical"].contains(&severity), "{name}");
            assert!(rule["annotations"]["summary"].is_string(), "{name}");
            assert!(rule["annotations"]["description"].is_string(), "{name}");
            // Each alert points at its own section of docs/runbook.md.
            let url = text(&rule["annotations"]["runbook_url"]);
            let (file, anchor) = url.split_once('#').unwrap();
            assert!(file.ends_with("docs/runbook.md"), "{name}: {url}");
            assert_eq!(anchor, name.to_lowercase(), "{name}: {url}");
            assert!(anchors.contains(anchor), "{name}: no section #{anchor}");
            alerts.insert(name);
        }
    }
    for needed in [
        "WaitroomPinnedAtCapacity",
        "WaitroomStoreUnreachable",
        "WaitroomNoLeader",
        "WaitroomOrigin5xx",
        "WaitroomAdmissionsBelowRate",
        "WaitroomTurnstileUnreachable",
        "WaitroomFileDescriptorsNearLimit",
        "WaitroomMemoryNearLimit",
    ] {
        assert!(alerts.contains(needed), "no {needed} alert");
    }
    assert!(used.contains("waitroom_rate_per_minute"));
    assert!(used.contains("process_open_fds"));
    assert!(used.contains("waitroom_memory_limit_bytes"));

    let k = Manifests::load();
    let operator = k.get("PrometheusRule", "waitroom");
    assert_eq!(
        operator["spec"], rules,
        "deploy/kubernetes/prometheusrule.yaml differs from deploy/prometheus/alerts.yaml"
    );
    // The rules live with Prometheus, not with Grafana; nothing points at the old place.
    assert!(!repo("deploy/grafana/alerts.yaml").exists());
    for file in [
        "deploy/kubernetes/prometheusrule.yaml",
        "deploy/kubernetes/kustomization.yaml",
        "deploy/prometheus/alerts.yaml",
        "docs/runbook.md",
    ] {
        assert!(!read(file).contains("grafana/alerts"), "{file}");
    }
}

/// A metric of the process as a whole (no room label).
fn describes_the_process(name: &str) -> bool {
    waitroom::observe::PROCESS_NAMES.contains(&name)
}

/// GitHub's anchors of docs/runbook.md's `##` sections: lower case, spaces as '-', other
/// punctuation dropped.
fn runbook_anchors() -> BTreeSet<String> {
    read("docs/runbook.md")
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|heading| {
            heading
                .trim()
                .to_lowercase()
                .chars()
                .filter_map(|c| match c {
                    ' ' => Some('-'),
                    c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

#[test]
fn the_runbook_has_a_section_for_every_alert_and_its_links_resolve() {
    let anchors = runbook_anchors();
    let text = read("docs/runbook.md");
    let mut rest = text.as_str();
    while let Some(at) = rest.find("](#") {
        let link = &rest[at + 3..];
        let anchor = &link[..link.find(')').unwrap()];
        assert!(anchors.contains(anchor), "broken link #{anchor}");
        rest = link;
    }
    let rules = documents("deploy/prometheus/alerts.yaml").remove(0);
    let alerts: BTreeSet<String> = rules["groups"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_sequence().unwrap())
        .map(|r| text_of(&r["alert"]).to_lowercase())
        .collect();
    let sections: BTreeSet<String> = anchors
        .iter()
        .filter(|a| a.starts_with("waitroom"))
        .cloned()
        .collect();
    assert_eq!(sections, alerts, "one runbook section per alert, no more");
}

fn text_of(v: &Value) -> String {
    text(v).to_owned()
}

#[test]
fn the_shipped_config_documents_the_new_keys() {
    let drop = read("config/drop.toml");
    for key in [
        "certificate",
        "grace_period",
        "upgrade_socket",
        "pid_file",
        "verify",
        "ca_file",
        "[log]",
        "access",
        "[rate_limit]",
        "tickets_per_ip_per_minute",
        "max_live_tickets_per_ip",
    ] {
        assert!(
            drop.contains(key),
            "config/drop.toml does not mention {key}"
        );
    }
}

/// promtool (Debian package prometheus, installed by scripts/setup.sh): None and a line on
/// stderr where it is missing, except under CI.
fn promtool() -> Option<&'static str> {
    if Command::new("promtool")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return Some("promtool");
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "promtool is not installed on this CI machine"
    );
    eprintln!("promtool is not installed: the alert rules are not checked by Prometheus itself");
    None
}

#[test]
fn promtool_accepts_the_rules_and_their_unit_tests_pass() {
    let Some(promtool) = promtool() else {
        return;
    };
    for args in [
        &["check", "rules", "alerts.yaml"][..],
        &["test", "rules", "alerts_test.yaml"][..],
    ] {
        let run = Command::new(promtool)
            .args(args)
            .current_dir(repo("deploy/prometheus"))
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
    }
}
