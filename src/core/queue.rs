//! The waiting line: visitors ordered by their place, with rank and k-th look-ups that stay cheap
//! for a million entries (sorted blocks: O(n / B + log B) per operation instead of O(n)).

/// A visitor's place in line: earlier arrivals have smaller places. Ties break on the id.
pub type Place = i64;

const MAX_BLOCK: usize = 1024;

#[derive(Debug, Default)]
pub struct OrderedQueue {
    blocks: Vec<Vec<(Place, String)>>,
    len: usize,
}

impl OrderedQueue {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The block an entry belongs in: the last block whose first entry is not after it.
    fn block_for(&self, key: &(Place, &str)) -> usize {
        let after = self
            .blocks
            .partition_point(|b| b.first().is_some_and(|(p, id)| (*p, id.as_str()) <= *key));
        after.saturating_sub(1)
    }

    pub fn insert(&mut self, place: Place, id: &str) {
        if self.blocks.is_empty() {
            self.blocks.push(Vec::new());
        }
        let b = self.block_for(&(place, id));
        let block = &mut self.blocks[b];
        let at = block.partition_point(|(p, i)| (*p, i.as_str()) < (place, id));
        if block.get(at).is_some_and(|(p, i)| *p == place && i == id) {
            return;
        }
        block.insert(at, (place, id.to_owned()));
        self.len += 1;
        if block.len() > MAX_BLOCK {
            let tail = block.split_off(MAX_BLOCK / 2);
            self.blocks.insert(b + 1, tail);
        }
    }

    pub fn remove(&mut self, place: Place, id: &str) -> bool {
        if self.blocks.is_empty() {
            return false;
        }
        let b = self.block_for(&(place, id));
        let block = &mut self.blocks[b];
        let at = block.partition_point(|(p, i)| (*p, i.as_str()) < (place, id));
        if !block.get(at).is_some_and(|(p, i)| *p == place && i == id) {
            return false;
        }
        block.remove(at);
        self.len -= 1;
        if block.is_empty() {
            self.blocks.remove(b);
        }
        true
    }

    /// How many entries stand before this one (0 for the head).
    pub fn rank(&self, place: Place, id: &str) -> usize {
        if self.blocks.is_empty() {
            return 0;
        }
        let b = self.block_for(&(place, id));
        let before: usize = self.blocks[..b].iter().map(Vec::len).sum();
        before + self.blocks[b].partition_point(|(p, i)| (*p, i.as_str()) < (place, id))
    }

    pub fn nth(&self, mut k: usize) -> Option<&(Place, String)> {
        for block in &self.blocks {
            if k < block.len() {
                return block.get(k);
            }
            k -= block.len();
        }
        None
    }

    pub fn first(&self) -> Option<&(Place, String)> {
        self.blocks.first().and_then(|b| b.first())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_rank_and_nth_across_many_blocks() {
        let mut q = OrderedQueue::default();
        // Insert out of order so blocks split in the middle.
        for i in (0..5000).rev() {
            q.insert(i * 2, &format!("v{i}"));
        }
        for i in 0..5000 {
            q.insert(i * 2 + 1, &format!("w{i}"));
        }
        assert_eq!(q.len(), 10_000);
        for place in [0, 1, 777, 5001, 9999] {
            let id = if place % 2 == 0 {
                format!("v{}", place / 2)
            } else {
                format!("w{}", place / 2)
            };
            assert_eq!(q.rank(place, &id), place as usize);
            assert_eq!(q.nth(place as usize), Some(&(place, id)));
        }
        assert!(q.remove(0, "v0"));
        assert!(!q.remove(0, "v0"));
        assert_eq!(q.first(), Some(&(1, "w0".to_owned())));
        assert_eq!(q.rank(1, "w0"), 0);
        assert_eq!(q.len(), 9_999);
    }

    #[test]
    fn equal_places_order_by_id_and_duplicates_are_ignored() {
        let mut q = OrderedQueue::default();
        q.insert(5, "b");
        q.insert(5, "a");
        q.insert(5, "a");
        assert_eq!(q.len(), 2);
        assert_eq!(q.rank(5, "a"), 0);
        assert_eq!(q.rank(5, "b"), 1);
    }

    #[test]
    fn draining_every_block_leaves_an_empty_queue() {
        let mut q = OrderedQueue::default();
        for i in 0..3000 {
            q.insert(i, "x");
        }
        for i in 0..3000 {
            assert!(q.remove(i, "x"));
        }
        assert!(q.is_empty());
        assert_eq!(q.first(), None);
        q.insert(1, "y");
        assert_eq!(q.rank(1, "y"), 0);
    }
}
