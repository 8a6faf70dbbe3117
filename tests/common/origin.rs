//! A real HTTP/1.1 origin on a free port, with a few behaviours the tests need:
//! `/revoke...` answers with the revoke command, `/slow` takes 3 s, `/delay/{ms}...` takes `ms`
//! milliseconds (an origin past its knee, for the autopilot), everything else echoes the
//! path and sets the origin's own cookie. It records the waiting-room cookie of each request.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::net::tcp::OwnedReadHalf;

#[derive(Default)]
pub struct Seen {
    /// (path, the `waitroom` cookie if any) of every request that reached the origin.
    pub requests: Vec<(String, Option<String>)>,
    /// Whether any request carried the proxy-only command header back (it must not).
    pub command_headers_in_requests: usize,
    /// Every request as it arrived: the request line and the headers.
    pub received: Vec<Request>,
}

#[derive(Clone)]
pub struct StubOrigin {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Seen>>,
}

impl StubOrigin {
    /// Serves on its own thread and runtime (so it works from sync and async tests alike) until
    /// the test process ends.
    pub fn start() -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let seen_by_server = seen.clone();
        let addr = serve_in_background(move |stream| {
            let seen = seen_by_server.clone();
            async move {
                let _ = serve(stream, seen).await;
            }
        });
        Self { addr, seen }
    }

    pub fn requests(&self) -> Vec<(String, Option<String>)> {
        self.seen.lock().unwrap().requests.clone()
    }

    /// Every request the origin received, as it arrived.
    pub fn received(&self) -> Vec<Request> {
        self.seen.lock().unwrap().received.clone()
    }
}

/// Accepts connections on a free loopback port, each handled by `handle` on a runtime of its own
/// thread, so it works from sync and async tests alike, until the test process ends.
pub fn serve_in_background<F, Fut>(handle: F) -> SocketAddr
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = TcpListener::from_std(listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                tokio::spawn(handle(stream));
            }
        });
    });
    addr
}

/// One HTTP/1.1 request as the tests' servers read it: the request line, the headers (names in
/// lower case, values trimmed) and the body.
#[derive(Debug, Clone)]
pub struct Request {
    pub line: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The request-target of the request line.
    pub fn target(&self) -> &str {
        self.line.split_whitespace().nth(1).unwrap_or("")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The next request on a keep-alive connection; None once the client closed it.
pub async fn read_request(
    reader: &mut BufReader<OwnedReadHalf>,
) -> std::io::Result<Option<Request>> {
    let mut line = String::new();
    if reader.read_line(&mut line).await? == 0 {
        return Ok(None);
    }
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).await?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').unwrap_or((header, ""));
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
    }
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await?;
    Ok(Some(Request {
        line,
        headers,
        body,
    }))
}

async fn serve(stream: tokio::net::TcpStream, seen: Arc<Mutex<Seen>>) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    while let Some(request) = read_request(&mut reader).await? {
        let path = request
            .line
            .split_whitespace()
            .nth(1)
            .unwrap_or("/")
            .to_owned();
        let room_cookie = request.header("cookie").and_then(|cookie| {
            cookie
                .split(';')
                .find_map(|kv| kv.trim().strip_prefix("waitroom=").map(str::to_owned))
        });
        if request.header("cf-waiting-room-command").is_some() {
            seen.lock().unwrap().command_headers_in_requests += 1;
        }
        {
            let mut seen = seen.lock().unwrap();
            seen.requests.push((path.clone(), room_cookie));
            seen.received.push(request.clone());
        }
        if path == "/slow" {
            tokio::time::sleep(Duration::from_secs(3)).await;
        }
        let delay = path
            .strip_prefix("/delay/")
            .and_then(|rest| rest.split(['/', '?']).next())
            .and_then(|ms| ms.parse::<u64>().ok());
        if let Some(ms) = delay {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        let text = format!("origin:{path}");
        let extra = if path.starts_with("/revoke") {
            "Cf-Waiting-Room-Command: revoke\r\n"
        } else if path.starts_with("/cached") {
            "Cache-Control: public, max-age=60, s-maxage=600\r\n"
        } else {
            ""
        };
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
             Set-Cookie: origin_session=abc; Path=/\r\n{extra}\r\n{text}",
            text.len()
        );
        write.write_all(response.as_bytes()).await?;
    }
    Ok(())
}
