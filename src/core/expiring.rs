//! A set of ids each with a deadline, that gives up the expired ones in deadline order.

use std::collections::{BTreeSet, HashMap};

use crate::clock::Millis;

#[derive(Debug, Default)]
pub struct ExpiringSet {
    deadlines: HashMap<String, Millis>,
    by_deadline: BTreeSet<(Millis, String)>,
}

impl ExpiringSet {
    pub fn len(&self) -> usize {
        self.deadlines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.deadlines.is_empty()
    }

    pub fn get(&self, id: &str) -> Option<Millis> {
        self.deadlines.get(id).copied()
    }

    pub fn contains(&self, id: &str) -> bool {
        self.deadlines.contains_key(id)
    }

    pub fn set(&mut self, id: &str, deadline: Millis) {
        if let Some(old) = self.deadlines.insert(id.to_owned(), deadline) {
            self.by_deadline.remove(&(old, id.to_owned()));
        }
        self.by_deadline.insert((deadline, id.to_owned()));
    }

    pub fn remove(&mut self, id: &str) -> Option<Millis> {
        let old = self.deadlines.remove(id)?;
        self.by_deadline.remove(&(old, id.to_owned()));
        Some(old)
    }

    pub fn ids(&self) -> Vec<String> {
        self.deadlines.keys().cloned().collect()
    }

    /// Removes and returns every id whose deadline is at or before `now`.
    pub fn take_expired(&mut self, now: Millis) -> Vec<String> {
        let mut expired = Vec::new();
        while let Some((deadline, _)) = self.by_deadline.first() {
            if *deadline > now {
                break;
            }
            if let Some((_, id)) = self.by_deadline.pop_first() {
                self.deadlines.remove(&id);
                expired.push(id);
            }
        }
        expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gives_up_expired_ids_in_deadline_order_and_moves_on_reset() {
        let mut s = ExpiringSet::default();
        s.set("a", 30);
        s.set("b", 10);
        s.set("c", 20);
        s.set("a", 5);
        assert_eq!(s.take_expired(20), vec!["a", "b", "c"]);
        assert_eq!(s.len(), 0);
        s.set("d", 50);
        assert_eq!(s.remove("d"), Some(50));
        assert!(s.take_expired(100).is_empty());
    }
}
