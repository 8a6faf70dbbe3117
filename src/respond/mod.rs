//! Turns the gate's decisions into replies: Cloudflare's JSON, the operator's template, or the
//! built-in pages in the visitor's language, with the ticket or pass cookie and the headers a
//! waiting page needs (Refresh, Retry-After, Content-Language, Vary).

pub mod cookies;
pub mod custom_page;
pub mod locale;
pub mod page;
pub mod proof;
pub mod reply;
pub mod status;

use std::sync::Arc;

use crate::clock::{SharedClock, rfc3339_ms};
use crate::config::model::{Branding, RoomConfig};
use crate::config::{QueueingMethod, RoomSettings};
use crate::core::queue_id::QueueId;
use crate::entry::EntryRefusal;
use crate::gate::{Answer, Asked, Decided, Decision, Forward, Limit, Shown, Wait, Watched};
use crate::language::{Locale, PageLanguage};
use crate::request::view::{Request, Reserved};
use crate::room::Room;
use crate::store::StoreError;
use cookies::CookieJar;
use custom_page::{CustomPage, PageVariables};
pub use page::Failure;
use page::{ChallengeView, ClosedView, Countdown, ErrorView, LeftView, Look, WaitingView};
use reply::Reply;
use status::{ChallengeBody, ProofOfWorkBody, StatusBody};

/// How the visitor asked to be answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Cloudflare's JSON (`Accept: application/json` or `?waitingroom_json=1`).
    Json,
    /// A page, in this language.
    Page(Locale),
}

/// What the pages of one room look like and how its cookies are set.
pub struct Responder {
    look: Look,
    /// `[page] template`: replaces the built-in waiting and closed pages.
    custom_page: Option<Arc<CustomPage>>,
    cookies: CookieJar,
    /// Where the waiting page's script follows the line (the room named when there are several).
    status_url: String,
    /// Where a proof of work's answer goes.
    proof_url: String,
    /// Where the waiting page's leave button posts.
    leave_url: String,
    /// The room's path: where the page after leaving offers to join again.
    room_path: String,
    /// `entry.login_url`: where a members-only line sends a newcomer without a token.
    login_url: Option<String>,
    clock: SharedClock,
}

impl Responder {
    /// A room's responder: its pages as `config` says (the template compiled now) and its
    /// cookies; `named` is the room's id in the reserved paths' URLs when the proxy runs several
    /// rooms.
    pub fn new(
        room: &Room,
        config: &RoomConfig,
        cookies: CookieJar,
        named: Option<&str>,
    ) -> Result<Self, ramhorns::Error> {
        let custom_page = config
            .template
            .as_ref()
            .map(|template| CustomPage::compile(template).map(Arc::new))
            .transpose()?;
        Ok(Self {
            look: Look::new(config.branding.clone()),
            custom_page,
            cookies,
            status_url: Reserved::Status.url(named),
            proof_url: Reserved::Proof.url(named),
            leave_url: Reserved::Leave.url(named),
            room_path: config
                .routes
                .first()
                .map_or("/", |r| r.path.as_str())
                .to_owned(),
            login_url: None,
            clock: room.clock.clone(),
        })
    }

    /// A members-only line's sign-in (`entry.login_url`).
    pub fn with_login_url(mut self, login_url: Option<String>) -> Self {
        self.login_url = login_url;
        self
    }

    pub fn branding(&self) -> &Branding {
        &self.look.branding
    }

    pub fn format(&self, req: &Request<'_>) -> Format {
        if req.wants_json() {
            Format::Json
        } else {
            let accept_language = req.header(http::header::ACCEPT_LANGUAGE);
            Format::Page(self.look.branding.language.locale_for(accept_language))
        }
    }

    /// Set-Cookie for the origin's answer to a forwarded request: the new or renewed pass.
    pub fn pass_cookie(&self, forward: &Forward) -> Option<String> {
        self.cookies.pass(forward.pass.as_ref()?)
    }

    /// A Set-Cookie value that deletes the visitor's cookie.
    pub fn clearing_cookie(&self) -> String {
        self.cookies.clearing()
    }

    /// The proxy's own answer, under the settings the decision saw.
    pub fn reply(&self, settings: &RoomSettings, answer: &Answer, format: Format) -> Reply {
        match answer {
            Answer::Wait(wait) => self.waiting(settings, wait, format),
            Answer::Closed => self.closed(settings, format),
            Answer::Challenge {
                queued,
                estimate,
                challenge,
            } => self.challenge(settings, *queued, *estimate, challenge, format),
            Answer::Limited {
                retry_after_secs,
                limit,
            } => self.limited(*retry_after_secs, *limit, format),
            Answer::Shared => self.shared(format),
            Answer::Entered { target, then } => self.entered(settings, target, then, format),
            Answer::EntryRequired => self.members_only(None, format),
            Answer::EntryRefused(refused) => self.members_only(Some(*refused), format),
            Answer::Blocked => self.blocked(format),
        }
    }

    /// A `block` rule held: 403, the page in the visitor's language (no cookie is set or
    /// cleared: the rule, not the visitor's state, refused it).
    fn blocked(&self, format: Format) -> Reply {
        match format {
            Format::Json => Reply::json(403, &serde_json::json!({ "error": "blocked" })),
            Format::Page(locale) => self.error_page_in(403, Failure::Blocked, locale),
        }
    }

    /// Back to the URL without the entry token (303), with the cookie of the key's place; an
    /// answer that is no place (the per-address limit, a closed room) is given as it is.
    fn entered(
        &self,
        settings: &RoomSettings,
        target: &str,
        then: &Decision,
        format: Format,
    ) -> Reply {
        let cookie = match then {
            Decision::Forward(forward) => self.pass_cookie(forward),
            Decision::Answer(Answer::Wait(wait)) => self
                .cookies
                .ticket(&wait.ticket, settings.abandon_after.as_secs()),
            Decision::Answer(other) => return self.reply(settings, other, format),
        };
        let reply = Reply::text(303, "").with_header("location", target.to_owned());
        match cookie {
            Some(cookie) => reply.with_header("set-cookie", cookie),
            None => reply,
        }
    }

    /// A members-only line without a valid token: to the sign-in (303) when there is one, else a
    /// page that says so; JSON clients get why and where to sign in.
    fn members_only(&self, refused: Option<EntryRefusal>, format: Format) -> Reply {
        match (format, &self.login_url) {
            (Format::Json, login_url) => Reply::json(
                403,
                &serde_json::json!({
                    "error": if refused.is_some() { "entry_refused" } else { "entry_required" },
                    "reason": refused.map(EntryRefusal::label),
                    "login_url": login_url,
                }),
            ),
            (Format::Page(_), Some(login_url)) => {
                Reply::text(303, "").with_header("location", login_url.clone())
            }
            (Format::Page(locale), None) => self.error_page_in(403, Failure::MembersOnly, locale),
        }
    }

    /// The JSON status (`/__waitroom/status`, the answer to the challenge): the decision's own
    /// JSON, or "admitted" with the pass cookie.
    pub fn status(&self, decided: &Decided) -> Reply {
        match &decided.decision {
            Decision::Forward(forward) => {
                let now = self.clock.now_ms();
                let body = StatusBody::new(&decided.settings, Shown::Admitted, now);
                let reply = Reply::json(200, &body);
                match self.pass_cookie(forward) {
                    Some(cookie) => reply.with_header("set-cookie", cookie),
                    None => reply,
                }
            }
            Decision::Answer(answer) => self.reply(&decided.settings, answer, Format::Json),
        }
    }

    /// One event of a waiting page's stream.
    pub fn watched(&self, watched: &Watched) -> StatusBody {
        StatusBody::new(&watched.settings, watched.shown, self.clock.now_ms())
    }

    /// `POST /__waitroom/leave`: JSON, or for the waiting page's button (a browser's form, which
    /// asks for HTML) the page that offers to join again at the back.
    pub fn left(
        &self,
        left: Result<bool, StoreError>,
        settings: &RoomSettings,
        req: &Request<'_>,
    ) -> Reply {
        let navigated = !req.wants_json()
            && req
                .header(http::header::ACCEPT)
                .is_some_and(|accept| accept.contains("text/html"));
        let accept_language = req.header(http::header::ACCEPT_LANGUAGE);
        let locale = self.look.branding.language.locale_for(accept_language);
        match left {
            // The store did not answer: the place is kept, the visitor may try again.
            Err(_) if navigated => self.error_page_in(503, Failure::Status, locale),
            Ok(_) if navigated => {
                let view = LeftView {
                    look: &self.look,
                    locale,
                    room_name: &settings.name,
                    rejoin_url: &self.room_path,
                };
                match page::render_left(&view) {
                    Ok(html) => {
                        Reply::html(200, html).with_header("content-language", locale.tag())
                    }
                    Err(e) => Reply::text(500, format!("cannot render the page: {e}\n")),
                }
                .with_header("set-cookie", self.cookies.clearing())
            }
            Ok(left) => Reply::json(200, &serde_json::json!({ "left": left }))
                .with_header("set-cookie", self.cookies.clearing()),
            Err(e) => Reply::json(
                503,
                &serde_json::json!({ "left": false, "error": e.to_string() }),
            ),
        }
    }

    /// A small branded error page (the origin failed, the request was refused), in the
    /// language the visitor's Accept-Language asks for when the room's pages follow it.
    pub fn error_page(
        &self,
        status: u16,
        failure: Failure,
        accept_language: Option<&str>,
    ) -> Reply {
        let locale = self.look.branding.language.locale_for(accept_language);
        self.error_page_in(status, failure, locale)
    }

    fn error_page_in(&self, status: u16, failure: Failure, locale: Locale) -> Reply {
        let view = ErrorView {
            look: &self.look,
            locale,
            status,
            failure,
        };
        match page::render_error(&view) {
            Ok(html) => Reply::html(status, html),
            Err(_) => Reply::text(status, format!("error {status}\n")),
        }
    }

    /// A reserved path asked with the wrong method, or one that does not exist.
    pub fn not_here(reserved: Reserved) -> Reply {
        match reserved {
            Reserved::Unknown => Reply::text(404, "no such waiting-room endpoint\n"),
            _ => Reply::text(405, "method not allowed\n"),
        }
    }

    fn waiting(&self, settings: &RoomSettings, wait: &Wait, format: Format) -> Reply {
        let now = self.clock.now_ms();
        let refresh = settings.refresh_interval.as_secs().max(1);
        let standing = Shown::Waiting {
            position: wait.position,
            queued: wait.queued,
            estimate: wait.estimate,
        };
        let mut body = StatusBody::new(settings, standing, now);
        let queue_id = QueueId::of(&wait.ticket.id).to_string();
        body.waitroom.queue_id = Some(queue_id.clone());
        // In a pre-queue a place means nothing until the start (and a shuffled one is drawn).
        let shown_position = match settings.queueing_method {
            QueueingMethod::Random => None,
            _ if settings.prequeueing() => None,
            _ => wait.position,
        };
        let event = settings.event.as_ref();
        let initial = wait.ticket.initial_position;
        let mut reply = self.page(settings, format, &body, shown_position, |locale| {
            page::render_waiting(&WaitingView {
                look: &self.look,
                locale,
                room_name: &settings.name,
                position: shown_position,
                queued: wait.queued,
                initial_position: (initial > 0).then_some(initial),
                estimate: wait.estimate,
                last_updated: rfc3339_ms(now),
                refresh_interval_seconds: refresh,
                status_url: &self.status_url,
                leave_url: &self.leave_url,
                queue_id: &queue_id,
                countdown: event.filter(|_| settings.prequeueing()).map(|e| Countdown {
                    starts_at: e.times.start_ms,
                    now,
                    shuffled: e.shuffle_at_event_start,
                }),
                heading: event.and_then(|e| e.heading.as_deref()),
                message: event.and_then(|e| e.message.as_deref()),
            })
        });
        reply = reply.with_header("refresh", refresh.to_string());
        if wait.sign
            && let Some(cookie) = self
                .cookies
                .ticket(&wait.ticket, settings.abandon_after.as_secs())
        {
            reply = reply.with_header("set-cookie", cookie);
        }
        reply
    }

    fn closed(&self, settings: &RoomSettings, format: Format) -> Reply {
        let body = StatusBody::new(settings, Shown::Closed, self.clock.now_ms());
        // Cloudflare renders the custom page for a reject queue too (isRejectQueue).
        self.page(settings, format, &body, None, |locale| {
            page::render_closed(&ClosedView {
                look: &self.look,
                locale,
                room_name: &settings.name,
            })
        })
    }

    fn challenge(
        &self,
        settings: &RoomSettings,
        queued: u64,
        estimate: crate::core::estimate::WaitEstimate,
        challenge: &Asked,
        format: Format,
    ) -> Reply {
        let standing = Shown::Waiting {
            position: None,
            queued,
            estimate,
        };
        let mut body = StatusBody::new(settings, standing, self.clock.now_ms());
        let challenge = match challenge {
            Asked::Turnstile(turnstile) => ChallengeBody::Turnstile((**turnstile).clone()),
            Asked::ProofOfWork(asked) => {
                let mut proof = ProofOfWorkBody::new(asked, &self.proof_url);
                if let Format::Page(locale) = format {
                    proof.widget = proof::widget(&proof, locale);
                }
                ChallengeBody::ProofOfWork(proof)
            }
        };
        body.waitroom.challenge = Some(challenge.clone());
        self.page(settings, format, &body, None, |locale| {
            let (message, widget) = match &challenge {
                ChallengeBody::Turnstile(t) => (locale.texts().challenge_message, &*t.widget),
                ChallengeBody::ProofOfWork(p) => (locale.texts().proof_message, p.widget.as_str()),
            };
            page::render_challenge(&ChallengeView {
                look: &self.look,
                locale,
                room_name: &settings.name,
                message,
                widget,
            })
        })
    }

    /// 429 for a refused new ticket: JSON for JSON clients, else a short page that tries again
    /// by itself (a visitor behind a busy office NAT gets in once the address has room).
    fn limited(&self, retry_after: u64, limit: Limit, format: Format) -> Reply {
        let reply = match format {
            Format::Json => {
                let (error, reason) = match limit {
                    Limit::TooFast => ("too_many_tickets", "rate"),
                    Limit::TooManyLive => ("too_many_tickets", "live"),
                    Limit::PassRate => ("too_many_requests", "pass_rate"),
                };
                Reply::json(
                    429,
                    &serde_json::json!({
                        "error": error,
                        "reason": reason,
                        "retryAfterSeconds": retry_after,
                    }),
                )
            }
            Format::Page(locale) => self
                .error_page_in(
                    429,
                    Failure::Limited {
                        limit,
                        retry_after_secs: retry_after,
                    },
                    locale,
                )
                .with_header("refresh", retry_after.to_string()),
        };
        reply.with_header("retry-after", retry_after.to_string())
    }

    /// 403 for a pass revoked for sharing: the visitor is told why, and its cookie is cleared,
    /// so its next request queues again like anyone's.
    fn shared(&self, format: Format) -> Reply {
        let reply = match format {
            Format::Json => Reply::json(
                403,
                &serde_json::json!({
                    "error": "pass_revoked",
                    "reason": "shared",
                }),
            ),
            Format::Page(locale) => self.error_page_in(403, Failure::Shared, locale),
        };
        reply.with_header("set-cookie", self.cookies.clearing())
    }

    /// A waiting-room answer in the form the visitor asked for: Cloudflare's JSON, the
    /// operator's template, or the built-in page in the visitor's language.
    fn page(
        &self,
        settings: &RoomSettings,
        format: Format,
        body: &StatusBody,
        shown_position: Option<u64>,
        builtin: impl FnOnce(Locale) -> Result<String, askama::Error>,
    ) -> Reply {
        let status = settings.queueing_status_code;
        let locale = match format {
            Format::Json => return Reply::json(status, body),
            Format::Page(locale) => locale,
        };
        if let Some(custom) = &self.custom_page {
            let variables = PageVariables::new(body, shown_position, &settings.name);
            return Reply::html(status, custom.render(&variables));
        }
        match builtin(locale) {
            Ok(html) => {
                let reply = Reply::html(status, html).with_header("content-language", locale.tag());
                // The page's language depends on Accept-Language only when it is the visitor's.
                match self.look.branding.language {
                    PageLanguage::Auto => reply.with_header("vary", "Accept-Language"),
                    PageLanguage::Fixed(_) => reply,
                }
            }
            Err(e) => Reply::text(500, format!("cannot render the page: {e}\n")),
        }
    }
}
