//! Scheduled events (a drop that opens at a set minute): which event governs the room at a given
//! time, and in which phase. Cloudflare's rules hold: a pre-queue opens before the start, the end
//! comes after the start, and no two events overlap (pre-queue included); unlike Cloudflare there
//! is no limit of five.

use crate::clock::Millis;

/// When one event opens its pre-queue, starts admitting, and ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventTimes {
    pub prequeue_ms: Option<Millis>,
    pub start_ms: Millis,
    pub end_ms: Millis,
}

impl EventTimes {
    /// From the pre-queue (or the start) to the end: the time the event governs the room.
    pub fn opens_ms(&self) -> Millis {
        self.prequeue_ms.unwrap_or(self.start_ms)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Every new visitor queues; nobody is admitted until the start.
    Prequeue,
    /// The event's settings govern the room.
    Running,
}

/// Why a set of events cannot be scheduled; the index is the event's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("event_start_time must come after prequeue_start_time")]
    PrequeueAfterStart(usize),
    #[error("event_end_time must come after event_start_time")]
    EndBeforeStart(usize),
    #[error("overlaps the event before it (pre-queue included)")]
    Overlap(usize),
}

impl ScheduleError {
    pub fn event(&self) -> usize {
        match self {
            ScheduleError::PrequeueAfterStart(i)
            | ScheduleError::EndBeforeStart(i)
            | ScheduleError::Overlap(i) => *i,
        }
    }
}

/// Checks every event on its own and against the others, in any order given.
pub fn validate(events: &[EventTimes]) -> Result<(), ScheduleError> {
    for (i, e) in events.iter().enumerate() {
        if e.prequeue_ms.is_some_and(|p| p >= e.start_ms) {
            return Err(ScheduleError::PrequeueAfterStart(i));
        }
        if e.end_ms <= e.start_ms {
            return Err(ScheduleError::EndBeforeStart(i));
        }
    }
    let mut order: Vec<usize> = (0..events.len()).collect();
    order.sort_by_key(|&i| events[i].opens_ms());
    for pair in order.windows(2) {
        let (before, after) = (events[pair[0]], events[pair[1]]);
        if after.opens_ms() < before.end_ms {
            return Err(ScheduleError::Overlap(pair[1]));
        }
    }
    Ok(())
}

/// The event governing the room at `now` and its phase; None between events.
pub fn current(events: &[EventTimes], now: Millis) -> Option<(usize, Phase)> {
    events.iter().enumerate().find_map(|(i, e)| {
        if now < e.opens_ms() || now >= e.end_ms {
            None
        } else if now < e.start_ms {
            Some((i, Phase::Prequeue))
        } else {
            Some((i, Phase::Running))
        }
    })
}

/// The first moment after `now` at which `current` may answer differently.
pub fn next_change(events: &[EventTimes], now: Millis) -> Millis {
    events
        .iter()
        .flat_map(|e| [e.prequeue_ms, Some(e.start_ms), Some(e.end_ms)])
        .flatten()
        .filter(|&t| t > now)
        .min()
        .unwrap_or(Millis::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(prequeue: Option<Millis>, start: Millis, end: Millis) -> EventTimes {
        EventTimes {
            prequeue_ms: prequeue,
            start_ms: start,
            end_ms: end,
        }
    }

    #[test]
    fn phases_follow_the_clock() {
        let events = [event(Some(100), 200, 300), event(None, 400, 500)];
        assert_eq!(current(&events, 99), None);
        assert_eq!(current(&events, 100), Some((0, Phase::Prequeue)));
        assert_eq!(current(&events, 199), Some((0, Phase::Prequeue)));
        assert_eq!(current(&events, 200), Some((0, Phase::Running)));
        assert_eq!(current(&events, 300), None);
        assert_eq!(current(&events, 400), Some((1, Phase::Running)));
        assert_eq!(current(&events, 500), None);
    }

    #[test]
    fn the_next_change_is_the_next_boundary() {
        let events = [event(Some(100), 200, 300), event(None, 400, 500)];
        assert_eq!(next_change(&events, 0), 100);
        assert_eq!(next_change(&events, 100), 200);
        assert_eq!(next_change(&events, 250), 300);
        assert_eq!(next_change(&events, 300), 400);
        assert_eq!(next_change(&events, 500), Millis::MAX);
        assert_eq!(next_change(&[], 0), Millis::MAX);
    }

    #[test]
    fn cloudflare_rules_are_enforced() {
        assert_eq!(validate(&[event(Some(100), 200, 300)]), Ok(()));
        assert_eq!(
            validate(&[event(Some(200), 200, 300)]),
            Err(ScheduleError::PrequeueAfterStart(0))
        );
        assert_eq!(
            validate(&[event(None, 200, 200)]),
            Err(ScheduleError::EndBeforeStart(0))
        );
        // The second event's pre-queue opens before the first ends.
        assert_eq!(
            validate(&[
                event(None, 400, 500),
                event(Some(250), 350, 360),
                event(None, 100, 300)
            ]),
            Err(ScheduleError::Overlap(1))
        );
        // Back to back is fine, in any order, and there is no limit of five.
        let many: Vec<_> = (0..20)
            .rev()
            .map(|k| event(None, k * 10, k * 10 + 10))
            .collect();
        assert_eq!(validate(&many), Ok(()));
    }
}
