//! The stable file format: what operators write in drop.toml. Unknown keys are errors, so a typo
//! never passes silently. Turned into the validated model by `model::Config::from_file`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::masking::{masked_secret, masked_url};

mod room_rules;
mod visitor_sections;
pub use room_rules::{RouteSection, RuleSection};
pub use visitor_sections::{
    DEFAULT_DIFFICULTY_BITS, DEFAULT_NOTIFY_QUEUE_SIZE, EntrySection, NotifySection,
    ProofOfWorkSection, TurnstileSection,
};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub listen: ListenSection,
    pub origin: OriginSection,
    /// The one-room shorthand; a file holds either `[room]` or `[[rooms]]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub room: Option<RoomSection>,
    /// Several rooms, each with its own line, numbers, page and autopilot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rooms: Vec<RoomEntry>,
    #[serde(default)]
    pub pass: PassSection,
    #[serde(default)]
    pub store: StoreSection,
    #[serde(default)]
    pub admin: AdminSection,
    #[serde(default)]
    pub page: PageSection,
    #[serde(default)]
    pub log: LogSection,
    /// Left out (or `mode = "off"`): no challenge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turnstile: Option<TurnstileSection>,
    #[serde(default)]
    pub proof_of_work: ProofOfWorkSection,
    #[serde(default)]
    pub entry: EntrySection,
    #[serde(default)]
    pub rate_limit: RateLimitSection,
    #[serde(default)]
    pub autopilot: AutopilotSection,
    #[serde(default)]
    pub notify: NotifySection,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ListenSection {
    pub address: String,
    /// Worker threads of the public listener; 0 means one per CPU.
    pub threads: usize,
    /// PEM certificate chain: with `key`, the listener speaks TLS (HTTP/2 and HTTP/1.1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// How long SIGTERM (or a hand-over) lets requests in flight finish.
    pub grace_period: String,
    /// Where a new process started with `--upgrade` receives the listening sockets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upgrade_socket: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid_file: Option<String>,
    /// Proxies (load balancers, CDNs) whose X-Forwarded-For is believed, as addresses or ranges.
    pub trusted_proxies: Vec<String>,
    /// The header a trusted proxy names the client's country in (Cloudflare's `CF-IPCountry`),
    /// for rules on `countries`; read only from a peer in `trusted_proxies`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country_header: Option<String>,
    /// Host names served besides the room's `host`: once a room names a host, requests for any
    /// other host are refused (421).
    pub hosts: Vec<String>,
    /// An idle keep-alive connection is closed after this long.
    pub keepalive_timeout: String,
    /// A request's head must have arrived this long after its first byte.
    pub header_timeout: String,
    /// Open visitor connections at most; 0: derived from the open-file limit at start.
    pub max_connections: u64,
    /// Open connections per client address at most; 0: no limit.
    pub max_connections_per_ip: u64,
    /// Open `/__waitroom/events` streams at most; 0: derived at start, half of
    /// `max_connections`, so streams never hold every connection.
    pub max_event_streams: u64,
    /// Open `/__waitroom/events` streams per client address at most; 0: no limit.
    pub max_event_streams_per_ip: u64,
    /// The longest silence between two reads of a request body before the connection is closed.
    pub body_timeout: String,
    /// Bytes a second a request body must average once it has taken longer than `body_timeout`;
    /// 0: no minimum.
    pub min_body_rate: u64,
}

impl Default for ListenSection {
    fn default() -> Self {
        Self {
            address: "0.0.0.0:8080".into(),
            threads: 0,
            certificate: None,
            key: None,
            grace_period: "10s".into(),
            trusted_proxies: Vec::new(),
            country_header: None,
            upgrade_socket: None,
            pid_file: None,
            hosts: Vec::new(),
            keepalive_timeout: "60s".into(),
            header_timeout: "15s".into(),
            max_connections: 0,
            max_connections_per_ip: 0,
            max_event_streams: 0,
            max_event_streams_per_ip: 6,
            body_timeout: "10s".into(),
            min_body_rate: 500,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OriginSection {
    /// host:port of the shop.
    pub address: String,
    #[serde(default)]
    pub tls: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sni: Option<String>,
    /// Check the origin's certificate (chain and name); off only for a test origin.
    #[serde(default = "defaults::yes")]
    pub verify: bool,
    /// PEM bundle of the CAs trusted for the origin instead of the system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_header: Option<String>,
    #[serde(default = "defaults::connect_timeout")]
    pub connect_timeout: String,
    #[serde(default = "defaults::read_timeout")]
    pub read_timeout: String,
    #[serde(default = "defaults::read_timeout")]
    pub write_timeout: String,
    /// How often the host of `address` is looked up again (the last good addresses are kept
    /// when a lookup fails).
    #[serde(default = "defaults::resolve_interval")]
    pub resolve_interval: String,
    /// Serve the built-in demo shop on `address` (for trying the product with nothing else).
    #[serde(default)]
    pub serve_demo_shop: bool,
    /// "private": the origin's answers to pass holders are kept out of shared caches;
    /// "as_sent": passed on as the origin sent them (an origin that varies correctly).
    #[serde(default = "defaults::protected_responses")]
    pub protected_responses: String,
}

/// One of `[[rooms]]`: everything a `[room]` has, and its own `[rooms.page]` and
/// `[rooms.autopilot]` (the top-level `[page]` and `[autopilot]` when it has none).
#[derive(Debug, Clone, Serialize)]
pub struct RoomEntry {
    #[serde(flatten)]
    pub room: RoomSection,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<PageSection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autopilot: Option<AutopilotSection>,
}

/// By hand: serde's `flatten` would let an unknown key of a room through silently (it turns off
/// `deny_unknown_fields`), so the page and autopilot tables are taken out first and the rest read
/// as a strict `RoomSection`.
impl<'de> Deserialize<'de> for RoomEntry {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut table = toml::Table::deserialize(deserializer)?;
        let page = table
            .remove("page")
            .map(|v| v.try_into::<PageSection>())
            .transpose()
            .map_err(|e| D::Error::custom(format!("page: {e}")))?;
        let autopilot = table
            .remove("autopilot")
            .map(|v| v.try_into::<AutopilotSection>())
            .transpose()
            .map_err(|e| D::Error::custom(format!("autopilot: {e}")))?;
        let room = toml::Value::Table(table)
            .try_into::<RoomSection>()
            .map_err(D::Error::custom)?;
        Ok(Self {
            room,
            page,
            autopilot,
        })
    }
}

/// The room: every key but `id`, `host`, `path`, `routes` and `cookie_domain` can be changed
/// live through the admin API.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RoomSection {
    pub id: String,
    #[serde(default = "defaults::room_name")]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(default = "defaults::path")]
    pub path: String,
    /// More host and path prefixes behind the same line, capacity and passes (Cloudflare's
    /// `additional_routes`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<RouteSection>,
    /// The parent domain the visitor's cookie is sent to (its `Domain`), so that a pass got on
    /// one of the room's hosts serves its routes on the others; left out, the cookie is the
    /// host's alone and every route stays on the room's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie_domain: Option<String>,
    pub total_active_users: u64,
    pub new_users_per_minute: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    #[serde(default = "defaults::session_duration")]
    pub session_duration: String,
    #[serde(default)]
    pub disable_session_renewal: bool,
    #[serde(default = "defaults::queueing_method")]
    pub queueing_method: String,
    #[serde(default = "defaults::queueing_status_code")]
    pub queueing_status_code: u16,
    #[serde(default)]
    pub queue_all: bool,
    #[serde(default)]
    pub suspended: bool,
    #[serde(default = "defaults::refresh_interval")]
    pub refresh_interval: String,
    #[serde(default = "defaults::abandon_after")]
    pub abandon_after: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_window: Option<String>,
    #[serde(default = "defaults::admission_interval")]
    pub admission_interval: String,
    #[serde(default)]
    pub bypass: Vec<String>,
    /// Paths (patterns like `bypass`) where any forwarded request may open a WebSocket (an
    /// `Upgrade`), in the room or outside every room on its host; elsewhere only pass holders on
    /// the room's protected paths may.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub websocket_paths: Vec<String>,
    /// Client addresses or ranges that skip the room (staff offices, monitoring).
    #[serde(default)]
    pub bypass_ips: Vec<String>,
    /// Headers that skip the room: "Name: secret", the header with exactly that value.
    #[serde(default)]
    pub bypass_headers: Vec<String>,
    /// Cookies that skip the room: "name=secret", the cookie with exactly that value.
    #[serde(default)]
    pub bypass_cookies: Vec<String>,
    /// Search-engine crawlers skip the room, uncounted, when both their User-Agent and their
    /// address say so (Cloudflare's search_engine_crawler_bypass).
    #[serde(default)]
    pub bypass_verified_crawlers: bool,
    /// More published ranges per crawler ("googlebot", "bingbot") beside the built-in ones.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub crawler_ranges: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub enabled_origin_commands: Vec<String>,
    /// `queueing_method = "lottery"`: arrivals within each window of this length are shuffled
    /// among themselves.
    #[serde(default = "defaults::lottery_window")]
    pub lottery_window: String,
    /// Scheduled drops; `[[room.events]]` in the file, /admin/events live.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventSection>,
    /// `[[room.rules]]`: bypass, protect or block by conditions on the request; the first rule
    /// that holds decides, before the bypass lists above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleSection>,
}

/// One scheduled event (Cloudflare's waiting room event, same names). Times are RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EventSection {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// From then on every new visitor queues, and nobody is admitted until the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prequeue_start_time: Option<String>,
    pub event_start_time: String,
    pub event_end_time: String,
    /// The pre-queue is put in random order at the start (the lottery); needs a pre-queue.
    #[serde(default)]
    pub shuffle_at_event_start: bool,
    /// A suspended event is ignored: the room's own settings apply.
    #[serde(default)]
    pub suspended: bool,
    /// With `new_users_per_minute`: the event's own limits (both or neither).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_active_users: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_users_per_minute: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_duration: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_session_renewal: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queueing_method: Option<String>,
    /// The waiting page's heading and message while the event governs the room.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heading: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `[proof_of_work]` on or off while the event governs the room (left out: the room's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proof_of_work: Option<bool>,
}

/// Three networks: a phone moving from Wi-Fi to mobile data and back to another Wi-Fi keeps its
/// pass; a pass handed to a farm on other networks is revoked at the fourth.
pub const DEFAULT_MAX_NETWORKS: u64 = 3;

/// A pass holder's requests to protected paths per minute. Static files are meant to be
/// bypassed (`room.bypass`), so what counts is pages and the shop's API calls: a product page
/// with a dozen API calls, opened every ten seconds in a few tabs, stays well under 300 (see
/// docs/configuration.md, "One pass, one person"); a pass shared with a farm of clones behind one
/// address does not.
pub const DEFAULT_MAX_REQUESTS_PER_MINUTE: u64 = 300;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PassSection {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    pub cookie_name: String,
    pub cookie_secure: bool,
    pub cookie_samesite: String,
    /// Client networks (IPv4 /24, IPv6 `rate_limit.ipv6_prefix`) a pass may be used from within
    /// one session before it is revoked as shared; 0 turns it off.
    pub max_networks: u64,
    /// Requests to protected paths per pass and minute; beyond, 429. 0 turns it off.
    pub max_requests_per_minute: u64,
}

impl Default for PassSection {
    fn default() -> Self {
        Self {
            secret: None,
            cookie_name: "waitroom".into(),
            cookie_secure: true,
            cookie_samesite: "Lax".into(),
            max_networks: DEFAULT_MAX_NETWORKS,
            max_requests_per_minute: DEFAULT_MAX_REQUESTS_PER_MINUTE,
        }
    }
}

#[derive(Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreSection {
    pub backend: String,
    pub prefix: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Redis Sentinels (`host:port`) that name the master: with `master_name`, the store follows
    /// a failover. `url`, if set, then gives only the master's credentials, TLS and database.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sentinels: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master_name: Option<String>,
    /// The Sentinels' own credentials, for Sentinels that ask for them (`requirepass`, or an
    /// ACL user of theirs); the master's are `url`'s. Prefer the WR_SENTINEL_PASSWORD variable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sentinel_username: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sentinel_password: Option<String>,
    /// Replicas that must acknowledge an admission's write (Redis `WAIT`) before the visitor
    /// gets its pass; 0: none asked.
    pub replica_acks: u32,
    /// How long an admission waits for them; past it, the visitor is let in all the same.
    pub replica_ack_timeout: String,
    pub on_error: String,
    pub connect_timeout: String,
    pub command_timeout: String,
    /// How long the admission leadership lasts without renewal.
    pub leader_ttl: String,
}

/// By hand: `url` may hold the store's password, `sentinel_password` is one, and a debug print
/// must show neither.
impl std::fmt::Debug for StoreSection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreSection")
            .field("backend", &self.backend)
            .field("prefix", &self.prefix)
            .field("url", &self.url.as_deref().map(masked_url))
            .field("sentinels", &self.sentinels)
            .field("master_name", &self.master_name)
            .field("sentinel_username", &self.sentinel_username)
            .field(
                "sentinel_password",
                &masked_secret(self.sentinel_password.as_deref()),
            )
            .field("replica_acks", &self.replica_acks)
            .field("replica_ack_timeout", &self.replica_ack_timeout)
            .field("on_error", &self.on_error)
            .field("connect_timeout", &self.connect_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("leader_ttl", &self.leader_ttl)
            .finish()
    }
}

impl Default for StoreSection {
    fn default() -> Self {
        Self {
            backend: "memory".into(),
            prefix: "wr:".into(),
            url: None,
            sentinels: Vec::new(),
            master_name: None,
            sentinel_username: None,
            sentinel_password: None,
            replica_acks: 0,
            replica_ack_timeout: "100ms".into(),
            on_error: "closed".into(),
            connect_timeout: "2s".into(),
            command_timeout: "500ms".into(),
            leader_ttl: "5s".into(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminSection {
    pub address: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// /readyz also answers 503 while the store is unreachable. Off by default: a store outage
    /// would otherwise take every instance out of the load balancer at once, while they can
    /// still serve pass holders and queue newcomers (`on_error`).
    pub ready_requires_store: bool,
    /// How long a sign-in to the console (`/admin/console`) lasts before it asks for the token
    /// again.
    pub console_session: String,
    /// PEM certificate chain: with `key`, the admin listener speaks TLS (HTTPS for the console
    /// and the API, its session cookie `Secure`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl Default for AdminSection {
    fn default() -> Self {
        Self {
            address: "127.0.0.1:9091".into(),
            token: None,
            ready_requires_store: false,
            console_session: "8h".into(),
            certificate: None,
            key: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct PageSection {
    /// Defaults to the room's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logo_url: Option<String>,
    pub primary_color: String,
    pub background_color: String,
    pub text_color: String,
    /// The texts below replace the page language's own in every language, so they are only
    /// set when the operator writes them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heading: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_heading: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed_message: Option<String>,
    /// A locale such as "fr-FR" (Cloudflare's name), or "auto" for the visitor's Accept-Language.
    pub default_template_language: String,
    /// A Cloudflare-style Mustache page served instead of the built-in one (relative paths are
    /// relative to the config file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
}

impl Default for PageSection {
    fn default() -> Self {
        Self {
            title: None,
            logo_url: None,
            primary_color: "#1d4ed8".into(),
            background_color: "#f8fafc".into(),
            text_color: "#0f172a".into(),
            heading: None,
            message: None,
            closed_heading: None,
            closed_message: None,
            default_template_language: "en-US".into(),
            template: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSection {
    /// "text" (one readable line per event) or "json" (one JSON object per line).
    pub format: String,
    /// One line per request with its decision; off for the busiest drops if logs cost too much.
    pub access: bool,
}

impl Default for LogSection {
    fn default() -> Self {
        Self {
            format: "text".into(),
            access: true,
        }
    }
}

/// Limits on new tickets per client address (an IPv4 address, or an IPv6 network of
/// `ipv6_prefix` bits); 0 turns each off.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitSection {
    pub tickets_per_ip_per_minute: u64,
    /// Tickets an address may take at once after a quiet spell (default: twice the per-minute
    /// rate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    pub max_live_tickets_per_ip: u64,
    /// IPv6 clients are counted by their network of this many leading bits.
    pub ipv6_prefix: u32,
}

/// A flood from one address is hundreds of tickets a second; an office behind one NAT at a drop
/// is a few hundred people arriving over minutes. One a second with two minutes' worth at once,
/// and 500 in line, holds the first and lets the second through.
impl Default for RateLimitSection {
    fn default() -> Self {
        Self {
            tickets_per_ip_per_minute: 60,
            burst: None,
            max_live_tickets_per_ip: 500,
            ipv6_prefix: 56,
        }
    }
}

/// `[autopilot]`: total_active_users (and the rate with it) steered by the origin's latency and
/// errors. Off unless `enabled`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AutopilotSection {
    pub enabled: bool,
    /// The p95 of the origin's latency over a window, not to exceed.
    pub latency_target: String,
    /// The share of failed origin exchanges not to exceed (0.02: 2 %).
    pub error_rate_max: f64,
    pub window: String,
    pub min_active_users: u64,
    pub max_active_users: u64,
    /// The least time between two changes.
    pub min_interval: String,
    /// The capacity only rises while p95 and errors are below their limits by this fraction.
    pub hysteresis: f64,
    /// Origin exchanges a window needs before it is judged.
    pub min_requests: u64,
    /// Paths whose origin exchanges are not judged (like `room.bypass`: `*` matches anything).
    pub exclude: Vec<String>,
}

/// The controller's own defaults, so the file and the core cannot drift apart.
impl Default for AutopilotSection {
    fn default() -> Self {
        let core = crate::core::autopilot::Settings::default();
        let text = |d| humantime::format_duration(d).to_string();
        Self {
            enabled: false,
            latency_target: text(core.latency_target),
            error_rate_max: core.error_rate_max,
            window: text(core.window),
            min_active_users: core.min_active_users,
            max_active_users: core.max_active_users,
            min_interval: text(core.min_interval),
            hysteresis: core.hysteresis,
            min_requests: core.min_requests,
            exclude: Vec::new(),
        }
    }
}

mod defaults {
    pub fn yes() -> bool {
        true
    }
    pub fn protected_responses() -> String {
        "private".into()
    }
    pub fn connect_timeout() -> String {
        "5s".into()
    }
    pub fn read_timeout() -> String {
        "60s".into()
    }
    pub fn resolve_interval() -> String {
        "30s".into()
    }
    pub fn room_name() -> String {
        "Waiting room".into()
    }
    pub fn path() -> String {
        "/".into()
    }
    pub fn session_duration() -> String {
        "5m".into()
    }
    pub fn queueing_method() -> String {
        "fifo".into()
    }
    pub fn queueing_status_code() -> u16 {
        200
    }
    pub fn refresh_interval() -> String {
        "20s".into()
    }
    pub fn abandon_after() -> String {
        "5m".into()
    }
    pub fn lottery_window() -> String {
        "30s".into()
    }
    pub fn admission_interval() -> String {
        "200ms".into()
    }
}
