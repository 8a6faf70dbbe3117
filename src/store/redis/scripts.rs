//! The Lua scripts (src/store/lua/) and the decoding of their answers.

use redis::{Script, Value};

use crate::store::{StoreError, StoreResult};

/// The room's keys, in the order every script expects them (see lua/common.lua).
pub(super) const KEY_NAMES: [&str; 13] = [
    "epoch", "queue", "places", "beats", "called", "passes", "revoked", "bucket", "recent",
    "counters", "leader", "settings", "visitors",
];

macro_rules! room_script {
    ($file:literal) => {
        Script::new(concat!(
            include_str!("../lua/common.lua"),
            include_str!(concat!("../lua/", $file))
        ))
    };
}

pub(super) struct Scripts {
    pub(super) admit_directly: Script,
    pub(super) admit_unconditionally: Script,
    pub(super) join: Script,
    pub(super) poll: Script,
    pub(super) touch_pass: Script,
    pub(super) end_pass: Script,
    pub(super) leave_queue: Script,
    pub(super) find_visitor: Script,
    pub(super) admission_round: Script,
    pub(super) counts: Script,
    pub(super) lead: Script,
    pub(super) resign: Script,
    pub(super) leader: Script,
    pub(super) save_settings: Script,
    pub(super) load_settings: Script,
    pub(super) keep_alive: Script,
    pub(super) due_beats: Script,
    /// The autopilot's: the room's KEYS and common arguments, and their own key at KEYS 14.
    pub(super) report_window: Script,
    pub(super) read_window: Script,
    pub(super) save_autopilot: Script,
    pub(super) load_autopilot: Script,
    pub(super) set_autopilot_paused: Script,
    /// The drop report's shares: the room's KEYS and common arguments, a minute's hash of
    /// shares (`{base}share:<minute>`) each from KEYS 14.
    pub(super) publish_shares: Script,
    pub(super) read_shares: Script,
    /// The per-address limit: its own keys (`{base}ip:<address>`, in the room's hash slot),
    /// apart from the room's shared KEYS and common arguments.
    pub(super) claim_ticket: Script,
    /// A pass's networks: its own key (`{base}nets:<pass>`, in the room's hash slot).
    pub(super) note_network: Script,
    /// Pass use by minute: a hash a minute (`{base}uses:<minute>`, in the room's hash slot).
    pub(super) report_pass_use: Script,
    /// A spent proof-of-work seed: its own key (`{base}seed:<id>`, in the room's hash slot).
    pub(super) spend_seed: Script,
}

impl Scripts {
    pub(super) fn new() -> Self {
        Self {
            admit_directly: room_script!("admit_directly.lua"),
            admit_unconditionally: room_script!("admit_unconditionally.lua"),
            join: room_script!("join.lua"),
            poll: room_script!("poll.lua"),
            touch_pass: room_script!("touch_pass.lua"),
            end_pass: room_script!("end_pass.lua"),
            leave_queue: room_script!("leave_queue.lua"),
            find_visitor: room_script!("find_visitor.lua"),
            admission_round: room_script!("admission_round.lua"),
            counts: room_script!("counts.lua"),
            lead: room_script!("lead.lua"),
            resign: room_script!("resign.lua"),
            leader: room_script!("leader.lua"),
            save_settings: room_script!("save_settings.lua"),
            load_settings: room_script!("load_settings.lua"),
            keep_alive: room_script!("keep_alive.lua"),
            due_beats: room_script!("due_beats.lua"),
            report_window: room_script!("report_window.lua"),
            read_window: room_script!("read_window.lua"),
            save_autopilot: room_script!("save_autopilot.lua"),
            load_autopilot: room_script!("load_autopilot.lua"),
            set_autopilot_paused: room_script!("set_autopilot_paused.lua"),
            publish_shares: room_script!("publish_shares.lua"),
            read_shares: room_script!("read_shares.lua"),
            claim_ticket: Script::new(include_str!("../lua/claim_ticket.lua")),
            note_network: Script::new(include_str!("../lua/note_network.lua")),
            report_pass_use: Script::new(include_str!("../lua/report_pass_use.lua")),
            spend_seed: Script::new(include_str!("../lua/spend_seed.lua")),
        }
    }
}

pub(super) fn corrupt(script: &str, what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{script} answered {what}"))
}

/// A script's answer, read element by element.
pub(super) struct Reply {
    script: &'static str,
    items: std::vec::IntoIter<Value>,
}

impl Reply {
    /// A script answers an array; anything else is corrupt.
    pub(super) fn new(script: &'static str, value: Value) -> StoreResult<Self> {
        let Value::Array(items) = value else {
            return Err(corrupt(script, format!("{value:?} for an array")));
        };
        Ok(Self {
            script,
            items: items.into_iter(),
        })
    }

    fn next(&mut self) -> StoreResult<Value> {
        self.items
            .next()
            .ok_or_else(|| corrupt(self.script, "too few elements"))
    }

    pub(super) fn int(&mut self) -> StoreResult<i64> {
        match self.next()? {
            Value::Int(n) => Ok(n),
            other => Err(corrupt(self.script, format!("{other:?} for a number"))),
        }
    }

    pub(super) fn count(&mut self) -> StoreResult<u64> {
        let n = self.int()?;
        u64::try_from(n).map_err(|_| corrupt(self.script, format!("negative count {n}")))
    }

    pub(super) fn flag(&mut self) -> StoreResult<bool> {
        match self.int()? {
            0 => Ok(false),
            1 => Ok(true),
            n => Err(corrupt(self.script, format!("{n} for a flag"))),
        }
    }

    pub(super) fn string(&mut self) -> StoreResult<String> {
        let value = self.next()?;
        text(self.script, value)
    }

    pub(super) fn rest_strings(self) -> StoreResult<Vec<String>> {
        let script = self.script;
        self.items.map(|v| text(script, v)).collect()
    }
}

pub(super) fn text(script: &str, value: Value) -> StoreResult<String> {
    match value {
        Value::BulkString(bytes) => {
            String::from_utf8(bytes).map_err(|_| corrupt(script, "a string that is not UTF-8"))
        }
        Value::SimpleString(s) => Ok(s),
        other => Err(corrupt(script, format!("{other:?} for a string"))),
    }
}
