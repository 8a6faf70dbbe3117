//! A local stand-in for Cloudflare's siteverify (this machine has no internet), answering as
//! Cloudflare documents: its published test secrets always pass, always fail, or report the
//! token as already spent, whatever the token; `PRODUCTION_SECRET` behaves like a real key: only
//! tokens issued by `issue_token`, each once. It records every call's form.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader};

use super::origin::{read_request, serve_in_background};

pub const PASS_SECRET: &str = "1x0000000000000000000000000000000AA";
pub const FAIL_SECRET: &str = "2x0000000000000000000000000000000AA";
pub const SPENT_SECRET: &str = "3x0000000000000000000000000000000AA";
/// Cloudflare's always-passing visible test site key.
pub const PASS_SITE_KEY: &str = "1x00000000000000000000AA";
/// What the test site keys hand the page instead of a real token.
pub const DUMMY_TOKEN: &str = "XXXX.DUMMY.TOKEN.XXXX";
pub const PRODUCTION_SECRET: &str = "0x4AAAAAAAfake-production-secret";

/// One siteverify call as the fake received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub secret: Option<String>,
    pub response: Option<String>,
    pub remoteip: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// Answers as Cloudflare documents.
    Cloudflare,
    /// Accepts the call and never answers (the proxy's timeout decides).
    Hang,
    /// Answers 500 with an HTML page, as a broken gateway in front of it would.
    ServerError,
}

#[derive(Default)]
struct State {
    calls: Vec<Call>,
    issued: HashSet<String>,
    spent: HashSet<String>,
}

#[derive(Clone)]
pub struct FakeSiteverify {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
}

impl FakeSiteverify {
    pub fn start(behaviour: Behaviour) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let addr = serve_in_background(move |stream| {
            let state = shared.clone();
            async move {
                let _ = serve(stream, state, behaviour).await;
            }
        });
        Self { addr, state }
    }

    pub fn url(&self) -> String {
        format!("http://{}/turnstile/v0/siteverify", self.addr)
    }

    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }

    /// A token as the real widget would get for `PRODUCTION_SECRET`'s site key.
    pub fn issue_token(&self) -> String {
        let token = format!("0.fake-{:032x}", rand::random::<u128>());
        self.state.lock().unwrap().issued.insert(token.clone());
        token
    }
}

fn form_value(form: &[(String, String)], name: &str) -> Option<String> {
    form.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

fn answer(state: &Mutex<State>, call: &Call) -> String {
    let (success, codes): (bool, &[&str]) = match (call.secret.as_deref(), call.response.as_deref())
    {
        (None, _) => (false, &["missing-input-secret"]),
        (_, None) => (false, &["missing-input-response"]),
        (Some(PASS_SECRET), _) => (true, &[]),
        (Some(FAIL_SECRET), _) => (false, &["invalid-input-response"]),
        (Some(SPENT_SECRET), _) => (false, &["timeout-or-duplicate"]),
        (Some(PRODUCTION_SECRET), Some(token)) => {
            let mut state = state.lock().unwrap();
            if state.spent.contains(token) {
                (false, &["timeout-or-duplicate"])
            } else if state.issued.remove(token) {
                state.spent.insert(token.to_owned());
                (true, &[])
            } else {
                (false, &["invalid-input-response"])
            }
        }
        (Some(_), _) => (false, &["invalid-input-secret"]),
    };
    serde_json::json!({
        "success": success,
        "error-codes": codes,
        "challenge_ts": "2026-11-29T20:00:00.000Z",
        "hostname": "example.com",
        "action": "",
        "cdata": "",
    })
    .to_string()
}

async fn serve(
    stream: tokio::net::TcpStream,
    state: Arc<Mutex<State>>,
    behaviour: Behaviour,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    while let Some(request) = read_request(&mut reader).await? {
        let is_post = request.line.starts_with("POST ");
        let form_encoded =
            request.header("content-type") == Some("application/x-www-form-urlencoded");
        let body = request.body;
        let (status, text) = if !is_post || !form_encoded {
            ("405 Method Not Allowed", "{}".to_owned())
        } else {
            let form: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
            let call = Call {
                secret: form_value(&form, "secret"),
                response: form_value(&form, "response"),
                remoteip: form_value(&form, "remoteip"),
            };
            state.lock().unwrap().calls.push(call.clone());
            match behaviour {
                Behaviour::Hang => {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    return Ok(());
                }
                Behaviour::ServerError => (
                    "500 Internal Server Error",
                    "<html>upstream error</html>".to_owned(),
                ),
                Behaviour::Cloudflare => ("200 OK", answer(&state, &call)),
            }
        };
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        write.write_all(response.as_bytes()).await?;
    }
    Ok(())
}
