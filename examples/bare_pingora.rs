//! A bare Pingora reverse proxy: `upstream_peer` and nothing else, Pingora's defaults
//! everywhere (its 64 KiB read buffer, no timeouts of ours, no front door). `load/open_pages.sh`
//! runs it beside waitroom-proxy, holding the same idle keep-alive connections, to show which
//! part of a connection's memory is Pingora's own (BENCHMARKS.md, "Open waiting pages").
//!
//!   cargo build --release --example bare_pingora
//!   target/release/examples/bare_pingora 127.0.0.1:8090 127.0.0.1:8081 [threads]

use std::process::ExitCode;

use async_trait::async_trait;
use pingora::prelude::HttpPeer;
use pingora::server::Server;
use pingora::server::configuration::ServerConf;
use pingora_proxy::{ProxyHttp, Session, http_proxy_service};

struct Bare {
    origin: String,
}

#[async_trait]
impl ProxyHttp for Bare {
    type CTX = ();

    fn new_ctx(&self) -> Self::CTX {}

    async fn upstream_peer(
        &self,
        _session: &mut Session,
        _ctx: &mut Self::CTX,
    ) -> pingora_core::Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(
            self.origin.as_str(),
            false,
            String::new(),
        )))
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (listen, origin) = match args.as_slice() {
        [listen, origin] | [listen, origin, _] => (listen.clone(), origin.clone()),
        _ => {
            eprintln!("usage: bare_pingora <listen address> <origin address> [threads]");
            return ExitCode::from(2);
        }
    };
    let threads = match args.get(2).map(|t| t.parse::<usize>()) {
        None => 2,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("bare_pingora: threads must be a number above 0");
            return ExitCode::from(2);
        }
    };
    let conf = ServerConf {
        threads,
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    server.bootstrap();
    let mut proxy = http_proxy_service(&server.configuration, Bare { origin });
    proxy.add_tcp(&listen);
    server.add_service(proxy);
    server.run_forever()
}
