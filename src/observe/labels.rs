//! What is counted, as values: each metric label a closed set, named once, so that every series
//! exists from the start at 0 (`rate()` needs a sample before the first failure) and no caller
//! passes a label as a string.

/// What happened to a request on the protected route, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Held a valid pass.
    Passed,
    /// Let in by this request (directly, or claiming its turn).
    Admitted,
    Queued,
    Bypassed,
    Rejected,
    /// Not covered by the room, the room suspended, or the store unreachable with
    /// on_error = "open".
    Unprotected,
    /// Shown the bot challenge instead of a place (`[turnstile]`).
    Challenged,
    /// Refused a new ticket by the per-address limit, or a pass holder over its rate (429).
    Limited,
    /// Held a pass revoked for sharing (403).
    Revoked,
    /// Refused by a `block` rule of the room (403).
    Blocked,
}

impl Outcome {
    pub const ALL: [Outcome; 10] = [
        Outcome::Passed,
        Outcome::Admitted,
        Outcome::Queued,
        Outcome::Bypassed,
        Outcome::Rejected,
        Outcome::Unprotected,
        Outcome::Challenged,
        Outcome::Limited,
        Outcome::Revoked,
        Outcome::Blocked,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Admitted => "admitted",
            Outcome::Queued => "queued",
            Outcome::Bypassed => "bypassed",
            Outcome::Rejected => "rejected",
            Outcome::Unprotected => "unprotected",
            Outcome::Limited => "limited",
            Outcome::Challenged => "challenged",
            Outcome::Revoked => "revoked",
            Outcome::Blocked => "blocked",
        }
    }
}

/// What became of a Turnstile token posted by the waiting page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChallengeResult {
    Passed,
    Failed,
    /// siteverify could not be asked or gave no usable answer.
    Unreachable,
    /// Not a token at all (missing, too long, bad characters): refused without asking.
    Malformed,
}

impl ChallengeResult {
    pub const ALL: [ChallengeResult; 4] = [
        ChallengeResult::Passed,
        ChallengeResult::Failed,
        ChallengeResult::Unreachable,
        ChallengeResult::Malformed,
    ];

    pub fn label(self) -> &'static str {
        match self {
            ChallengeResult::Passed => "passed",
            ChallengeResult::Failed => "failed",
            ChallengeResult::Unreachable => "unreachable",
            ChallengeResult::Malformed => "malformed",
        }
    }
}

/// What became of a proof-of-work answer, as `waitroom_proofs_total{result}` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProofResult {
    /// A fresh seed of this room, solved: a place (or the per-address limit's refusal).
    Passed,
    /// The nonce does not solve the seed.
    Wrong,
    /// Not a seed of this room, or past its lifetime.
    Expired,
    /// Solved, but the seed was spent already (a replay, on this instance or another).
    Spent,
    /// No seed or nonce in the form.
    Malformed,
}

impl ProofResult {
    pub const ALL: [ProofResult; 5] = [
        ProofResult::Passed,
        ProofResult::Wrong,
        ProofResult::Expired,
        ProofResult::Spent,
        ProofResult::Malformed,
    ];

    pub fn label(self) -> &'static str {
        match self {
            ProofResult::Passed => "passed",
            ProofResult::Wrong => "wrong",
            ProofResult::Expired => "expired",
            ProofResult::Spent => "spent",
            ProofResult::Malformed => "malformed",
        }
    }
}

/// What an entry token (`[entry]`) or its absence came to, as `waitroom_entries_total{result}`
/// counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryResult {
    /// A valid token: the customer's place (or the per-address limit's refusal).
    Entered,
    /// A newcomer without a token in a members-only line.
    Required,
    Forged,
    Expired,
    OtherRoom,
}

impl EntryResult {
    pub const ALL: [EntryResult; 5] = [
        EntryResult::Entered,
        EntryResult::Required,
        EntryResult::Forged,
        EntryResult::Expired,
        EntryResult::OtherRoom,
    ];

    pub fn label(self) -> &'static str {
        match self {
            EntryResult::Entered => "entered",
            EntryResult::Required => "required",
            EntryResult::Forged => "forged",
            EntryResult::Expired => "expired",
            EntryResult::OtherRoom => "other_room",
        }
    }
}

/// What became of a `[notify]` webhook call, as `waitroom_notifications_total` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotifyResult {
    /// The receiver answered 2xx.
    Sent,
    /// Every try failed (an error status, a timeout, no connection).
    Failed,
    /// Never tried: the queue was full, or the room already held as many contacts as it keeps.
    Dropped,
}

impl NotifyResult {
    pub const ALL: [NotifyResult; 3] = [
        NotifyResult::Sent,
        NotifyResult::Failed,
        NotifyResult::Dropped,
    ];

    pub fn label(self) -> &'static str {
        match self {
            NotifyResult::Sent => "sent",
            NotifyResult::Failed => "failed",
            NotifyResult::Dropped => "dropped",
        }
    }
}

/// Every `kind` of `waitroom_upstream_errors_total`, in the order of [`UpstreamFailure`].
pub const UPSTREAM_ERROR_KINDS: [&str; 5] = ["connect", "tls", "timeout", "status", "resolve"];

/// Why forwarding to the origin failed, as `waitroom_upstream_errors_total` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamFailure {
    /// The origin refused or dropped the connection.
    Connect,
    /// The TLS handshake with the origin failed.
    Tls,
    /// The origin did not connect, answer or take the request in time.
    Timeout,
    /// An error status the proxy answers with its own page.
    Status,
    /// No address is known for the origin's name.
    Resolve,
}

impl UpstreamFailure {
    pub const ALL: [UpstreamFailure; 5] = [
        UpstreamFailure::Connect,
        UpstreamFailure::Tls,
        UpstreamFailure::Timeout,
        UpstreamFailure::Status,
        UpstreamFailure::Resolve,
    ];

    pub fn label(self) -> &'static str {
        UPSTREAM_ERROR_KINDS[self as usize]
    }
}

/// Every `reason` of `waitroom_event_streams_refused_total`, in the order of [`StreamRefusal`].
pub const STREAM_REFUSALS: [&str; 3] = ["visitor", "address", "proxy"];

/// Why an event stream was answered "poll instead".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamRefusal {
    /// The visitor's share: a ticket's few tabs.
    Visitor,
    /// The client address's share (`listen.max_event_streams_per_ip`).
    Address,
    /// The proxy's (`listen.max_event_streams`).
    Proxy,
}

impl StreamRefusal {
    pub const ALL: [StreamRefusal; 3] = [
        StreamRefusal::Visitor,
        StreamRefusal::Address,
        StreamRefusal::Proxy,
    ];

    pub fn label(self) -> &'static str {
        STREAM_REFUSALS[self as usize]
    }
}

/// Every `stage` of `waitroom_upgrades_refused_total`, in the order of [`UpgradeRefusal`].
pub const UPGRADE_REFUSALS: [&str; 2] = ["request", "response"];

/// Where a tunnel the gate did not allow was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeRefusal {
    /// An `Upgrade` taken off a request that may not open a tunnel.
    Request,
    /// A 101 the origin sent anyway, answered 502.
    Response,
}

impl UpgradeRefusal {
    pub const ALL: [UpgradeRefusal; 2] = [UpgradeRefusal::Request, UpgradeRefusal::Response];

    pub fn label(self) -> &'static str {
        UPGRADE_REFUSALS[self as usize]
    }
}

/// Every `class` of `waitroom_origin_responses_total`.
pub const ORIGIN_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

#[cfg(test)]
mod tests {
    use super::*;

    /// Each label is read by its position: the lists and the enums keep one order.
    #[test]
    fn each_list_is_in_the_order_of_its_values() {
        for (i, f) in UpstreamFailure::ALL.iter().enumerate() {
            assert_eq!(*f as usize, i);
        }
        for (i, r) in StreamRefusal::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        for (i, u) in UpgradeRefusal::ALL.iter().enumerate() {
            assert_eq!(*u as usize, i);
        }
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(*o as usize, i);
        }
        for (i, c) in ChallengeResult::ALL.iter().enumerate() {
            assert_eq!(*c as usize, i);
        }
    }
}
