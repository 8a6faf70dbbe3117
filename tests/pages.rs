#![allow(clippy::unwrap_used)]
//! The waiting pages through the real proxy: the page shared with Cloudflare
//! (infra/cloudflare/waiting.html as `[page] template`) and the built-in page in the visitor's
//! language.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::proxy::TestProxy;
use waitroom::config::model::page_template::VARIABLES;

const TEMPLATE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/infra/cloudflare/waiting.html");

fn with_template(extra: &str) -> String {
    format!("[page]\ntemplate = \"{TEMPLATE}\"\n{extra}")
}

/// The `data-*` attributes of the page's `<main id="wr">`.
fn main_data(html: &str) -> BTreeMap<String, String> {
    let start = html.find(r#"<main class="card" id="wr""#).unwrap();
    let tag = &html[start..start + html[start..].find('>').unwrap()];
    tag.split(" data-")
        .skip(1)
        .map(|pair| {
            let (name, value) = pair.split_once("=\"").unwrap();
            let value = value.split('"').next().unwrap();
            (name.to_owned(), value.to_owned())
        })
        .collect()
}

/// No tag left unrendered ("}}" also ends CSS rules, so the stylesheet is left out).
fn assert_no_mustache(html: &str) {
    let style = html.find("<style>").unwrap()..html.find("</style>").unwrap();
    let outside_style = format!("{}{}", &html[..style.start], &html[style.end..]);
    assert!(!html.contains("{{"), "an opening tag is left");
    assert!(!outside_style.contains("}}"), "a closing tag is left");
}

/// A fresh visitor's GET with extra request headers.
async fn get(proxy: &TestProxy, path: &str, headers: &[(&str, &str)]) -> reqwest::Response {
    let mut req = reqwest::Client::new().get(format!("{}{path}", proxy.base));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_template_renders_with_every_variable_filled() {
    let proxy = TestProxy::start_with(
        "total_active_users = 1\nnew_users_per_minute = 1000",
        &with_template(""),
    );
    let mut inside = proxy.visitor();
    assert!(inside.get("/").await.reached_origin());
    let mut waiter = proxy.visitor();
    let page = waiter.get("/drop").await;
    assert_eq!(page.status, 200);
    assert_eq!(page.header("refresh"), Some("2"));
    assert!(
        page.header("content-type")
            .unwrap_or("")
            .starts_with("text/html")
    );
    assert_no_mustache(&page.body);

    // The template uses every variable, and each is filled in.
    let source = std::fs::read_to_string(TEMPLATE).unwrap();
    for name in VARIABLES {
        assert!(
            ["{{", "{{#", "{{^", "{{{"]
                .iter()
                .any(|open| source.contains(&format!("{open}{name}}}"))),
            "waiting.html never uses {name}"
        );
    }
    let data = main_data(&page.body);
    assert_eq!(
        data.len(),
        VARIABLES.len() - 6,
        "all but turnstile and the proof of work's: {data:?}"
    );
    for (name, value) in &data {
        assert!(!value.is_empty(), "data-{name} is empty");
    }
    for (name, value) in [
        ("in-waiting-room", "true"),
        ("wait-time-known", "false"),
        ("wait-time-formatted", "unavailable"),
        ("refresh-interval-seconds", "2"),
        ("queueing-method", "fifo"),
        ("is-fifo-queue", "true"),
        ("is-reject-queue", "false"),
        ("time-until-event-start-formatted", "unavailable"),
        ("position", "1"),
        ("queued", "1"),
        ("room-name", "Test drop"),
    ] {
        assert_eq!(data[name], value, "data-{name}");
    }
    assert!(data["last-updated"].ends_with('Z'));
    assert!(page.body.contains(
        r#"<span class="lbl">You are number</span> <strong class="num" id="wr-num">1</strong>"#
    ));
    assert!(
        page.body
            .contains("<title>#1 in line · You're in line</title>")
    );
    assert!(
        page.body
            .contains("<footer>Waiting room: Test drop</footer>")
    );
    assert!(page.body.contains(">Not known yet</dd>"));
    assert!(page.body.contains("<script>"));

    // The page's script polls its own URL for JSON, and the shop's answer means "you are in".
    let json = waiter.get_json("/drop").await.json();
    assert_eq!(json["cfWaitingRoom"]["inWaitingRoom"], true);
    inside.leave().await;
    let mut admitted = false;
    for _ in 0..100 {
        proxy.tick().await;
        let answer = waiter.get_json("/drop").await;
        if answer.reached_origin() {
            admitted = !answer
                .header("content-type")
                .unwrap_or("")
                .starts_with("application/json");
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(admitted, "the poll never got the shop's page");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_template_is_the_closed_page_too() {
    let proxy = TestProxy::start_with(
        "total_active_users = 5\nnew_users_per_minute = 5\nqueueing_method = \"reject\"",
        &with_template(""),
    );
    let page = proxy.visitor().get("/").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<h1>This drop is closed</h1>"));
    assert!(!page.body.contains("You're in line</h1>"));
    assert!(
        !page.body.contains("<script>"),
        "a reject page does not poll"
    );
    let data = main_data(&page.body);
    assert_eq!(data["is-reject-queue"], "true");
    assert_eq!(data["refresh-interval-seconds"], "0");
    assert_no_mustache(&page.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_template_stops_the_config_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("bad.html");
    std::fs::write(&template, "<p>\n{{#waitTimeKnown}}\n{{waitTime}}\n</p>\n").unwrap();
    let config = dir.path().join("room.toml");
    std::fs::write(
        &config,
        "[origin]\naddress = \"127.0.0.1:1\"\n[room]\nid = \"r\"\ntotal_active_users = 1\n\
         new_users_per_minute = 1\n[page]\ntemplate = \"bad.html\"\n",
    )
    .unwrap();
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_waitroom-proxy"))
        .arg("--config")
        .arg(&config)
        .args(["--test", "--dev"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("page.template: ")
            && stderr.contains("bad.html: line 2: {{#waitTimeKnown}} is never closed"),
        "{stderr}"
    );

    // A name nobody fills is only a warning, with its line; the template is found beside the
    // config file.
    std::fs::write(&template, "<p>\n\n{{waittime}}</p>\n").unwrap();
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_waitroom-proxy"))
        .arg("--config")
        .arg(&config)
        .args(["--test", "--dev"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(
        stderr.contains("line 3: {{waittime}} is not a variable"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_in_page_speaks_the_visitors_language() {
    let proxy = TestProxy::start_with(
        "total_active_users = 1\nnew_users_per_minute = 100",
        "[page]\ndefault_template_language = \"auto\"",
    );
    assert!(proxy.visitor().get("/").await.reached_origin());
    let cases = [
        ("fr-CH, de;q=0.5", "fr-FR", "Vous êtes le numéro"),
        ("ja", "ja-JP", "あなたの順番は"),
        ("de-AT;q=0.9, es;q=0.8", "de-DE", "Sie sind Nummer"),
        ("ko-KR", "ko-KR", "현재 대기 순서"),
        ("sw, zh-Hant-HK;q=0.9", "zh-TW", "您的排隊位置"),
        ("sw", "en-US", "You are number"),
        ("", "en-US", "You are number"),
    ];
    for (accept_language, tag, text) in cases {
        let headers: Vec<(&str, &str)> = if accept_language.is_empty() {
            Vec::new()
        } else {
            vec![("accept-language", accept_language)]
        };
        let answer = get(&proxy, "/", &headers).await;
        let header = |name: &str| {
            answer
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        assert_eq!(header("content-language"), tag);
        assert_eq!(header("vary"), "Accept-Language");
        let html = answer.text().await.unwrap();
        assert!(
            html.contains(&format!("<html lang=\"{tag}\" dir=\"ltr\">")),
            "{accept_language}"
        );
        assert!(html.contains(text), "{accept_language}: {text}");
    }

    // The JSON stays Cloudflare's English whatever the language.
    let json: serde_json::Value = get(
        &proxy,
        "/",
        &[("accept", "application/json"), ("accept-language", "fr-FR")],
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(json["cfWaitingRoom"]["waitTimeFormatted"], "unavailable");
}

/// Arabic, Hebrew and Persian visitors get their page right to left, in their language.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn right_to_left_visitors_get_a_right_to_left_page() {
    let proxy = TestProxy::start_with(
        "total_active_users = 1\nnew_users_per_minute = 100",
        "[page]\ndefault_template_language = \"auto\"",
    );
    assert!(proxy.visitor().get("/").await.reached_origin());
    for (accept_language, tag, text) in [
        ("ar", "ar-EG", "رقمك في الطابور"),
        ("he-IL,he;q=0.9,en;q=0.8", "he-IL", "אתם מספר"),
        ("fa", "fa-IR", "شماره شما"),
    ] {
        let answer = get(&proxy, "/", &[("accept-language", accept_language)]).await;
        assert_eq!(answer.status(), 200);
        let language = answer.headers().get("content-language").cloned();
        assert_eq!(language.as_ref().and_then(|v| v.to_str().ok()), Some(tag));
        let html = answer.text().await.unwrap();
        assert!(
            html.contains(&format!("<html lang=\"{tag}\" dir=\"rtl\">")),
            "{accept_language}: {html}"
        );
        assert!(html.contains(text), "{accept_language}: {text}");
        assert!(
            html.contains("[dir=rtl] .fill::after,[dir=rtl] .indeterminate .fill"),
            "the stylesheet runs the bar's animations right to left"
        );
    }
    // The script's texts are the locale's, plural forms by their CLDR names.
    let html = get(&proxy, "/", &[("accept-language", "ar")])
        .await
        .text()
        .await
        .unwrap();
    assert!(html.contains(r#""locale":"ar-EG""#));
    assert!(html.contains(r#""two":"دقيقتان""#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_language_ignores_accept_language() {
    let proxy = TestProxy::start_with(
        "total_active_users = 1\nnew_users_per_minute = 100",
        "[page]\ndefault_template_language = \"pt-BR\"\nheading = \"Aguarde\"",
    );
    assert!(proxy.visitor().get("/").await.reached_origin());
    let answer = get(&proxy, "/", &[("accept-language", "de")]).await;
    assert!(answer.headers().get("vary").is_none());
    let html = answer.text().await.unwrap();
    assert!(html.contains("<html lang=\"pt-BR\" dir=\"ltr\">"));
    assert!(
        html.contains("<h1>Aguarde</h1>"),
        "the operator's heading wins"
    );
    assert!(html.contains("Você é o número"));
}

/// The stylesheet between `<style>` and `</style>`, its first line (the colours) apart.
fn stylesheet(html: &str) -> (&str, &str) {
    let start = html.find("<style>\n").unwrap() + "<style>\n".len();
    let end = html.find("</style>").unwrap();
    html[start..end].split_once('\n').unwrap()
}

/// One stylesheet for the built-in page and the page shipped for Cloudflare's managed room:
/// templates/page.css, which the built-in pages include and infra/cloudflare/waiting.html
/// carries as it is (Terraform reads that file whole, so it cannot include).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_built_in_and_the_cloudflare_page_share_one_stylesheet() {
    let css = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/templates/page.css"))
        .unwrap();
    let shipped = std::fs::read_to_string(TEMPLATE).unwrap();
    let (colours, rules) = stylesheet(&shipped);
    assert!(colours.starts_with(":root{--primary:"), "{colours}");
    assert_eq!(
        rules, css,
        "infra/cloudflare/waiting.html's stylesheet differs from templates/page.css: copy \
         templates/page.css into it, after its :root line"
    );

    let proxy = TestProxy::start(
        "total_active_users = 5\nnew_users_per_minute = 5\nqueueing_method = \"reject\"",
    );
    let page = proxy.visitor().get("/").await;
    assert!(page.body.contains("<h1>"), "{}", page.body);
    let (colours, rules) = stylesheet(&page.body);
    assert!(colours.starts_with(":root{--primary:#"), "{colours}");
    assert_eq!(rules, css, "the built-in page includes templates/page.css");
}

/// The branded page when the origin fails speaks the visitor's language like the other pages
/// (`default_template_language = "auto"`), and the room's fixed one otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_failure_page_speaks_the_visitors_language() {
    let closed = common::proxy::RefusingPort::bind();
    let room = "total_active_users = 100\nnew_users_per_minute = 1000";
    for (language, accept, heading, lang) in [
        (
            "auto",
            "de-DE,de;q=0.9",
            "Der Shop antwortet gerade nicht",
            "de-DE",
        ),
        ("auto", "ja", "ショップが現在応答していません", "ja-JP"),
        ("auto", "ar-EG", "المتجر لا يستجيب الآن", "ar-EG"),
        ("auto", "sk", "Obchod teraz neodpovedá", "sk-SK"),
        (
            "fr-FR",
            "de",
            "La boutique ne répond pas pour le moment",
            "fr-FR",
        ),
    ] {
        let proxy = TestProxy::start_before(
            closed.addr,
            room,
            &format!("[page]\ndefault_template_language = \"{language}\""),
            common::origin::StubOrigin::start(),
        );
        let answer = get(&proxy, "/shoes", &[("accept-language", accept)]).await;
        assert_eq!(answer.status(), 502);
        let html = answer.text().await.unwrap();
        let dir = if lang == "ar-EG" { "rtl" } else { "ltr" };
        assert!(
            html.contains(&format!("<html lang=\"{lang}\" dir=\"{dir}\">")),
            "{html}"
        );
        assert!(html.contains(heading), "{html}");
    }
}
