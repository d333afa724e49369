//! Cursors over one snapshot of a tree: seeks, steps both ways, ranks.
//!
//! A cursor keeps the path from the root to its leaf (page and index per level), so a step
//! past a leaf's end climbs only as far as the next subtree: no sibling links, which a
//! copy-on-write tree could not keep (a sibling's copy would need its neighbours copied).

use super::overflow::read_key;
use super::page::PageRead;
use super::tree::{PageSource, Root, NO_PAGE};

/// Where a cursor stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cursor {
    /// (page, index) from the root down; the last is the leaf and its entry.
    path: Vec<(u64, usize)>,
    /// Whether the cursor is on an entry.
    on: bool,
}

impl Cursor {
    /// A cursor on nothing.
    pub fn new() -> Cursor {
        Cursor {
            path: Vec::new(),
            on: false,
        }
    }

    /// The leaf page and index of the entry the cursor is on.
    pub fn at(&self) -> Option<(u64, usize)> {
        self.on.then(|| *self.path.last().expect("on an entry"))
    }

    /// Descends from `off` at `level` to the leaf, taking child `pick(page)` each time.
    fn descend<S: PageSource>(
        &mut self,
        s: &S,
        mut off: u64,
        level: u32,
        pick: impl Fn(&S::Page<'_>) -> usize,
    ) {
        for _ in 0..level {
            s.prefetch_search(off, None);
            let p = s.page(off);
            s.prefetch_search(off, Some(p.n()));
            let c = pick(&p);
            self.path.push((off, c));
            off = p.child(c).0;
        }
        s.prefetch_search(off, None);
        let p = s.page(off);
        s.prefetch_search(off, Some(p.n()));
        let i = pick(&p);
        self.path.push((off, i));
    }

    /// Moves to the first entry whose key is >= `key`.
    pub fn seek_ge<S: PageSource>(&mut self, s: &S, root: Root, key: &[u8]) -> bool {
        self.path.clear();
        self.on = false;
        if root.page == NO_PAGE {
            return false;
        }
        let rest = |first, len| read_key(s, first, len);
        self.descend(s, root.page, root.depth, |p| {
            if p.kind() == super::page::LEAF {
                match p.search(key, &rest) {
                    Ok(i) | Err(i) => i,
                }
            } else {
                p.child_index(key, &rest)
            }
        });
        self.settle_forward(s)
    }

    /// Moves to `key` exactly.
    #[cfg(test)]
    pub fn seek_exact<S: PageSource>(&mut self, s: &S, root: Root, key: &[u8]) -> bool {
        if !self.seek_ge(s, root, key) {
            return false;
        }
        let (off, i) = self.at().expect("on");
        self.on = is_at(s, off, i, key);
        self.on
    }

    /// Moves to the last entry whose key is <= `key`.
    pub fn seek_le<S: PageSource>(&mut self, s: &S, root: Root, key: &[u8]) -> bool {
        if self.seek_ge(s, root, key) {
            let (off, i) = self.at().expect("on");
            if is_at(s, off, i, key) {
                return true;
            }
            return self.prev(s);
        }
        // Past the end (or empty): the last entry, if any, is below `key`.
        self.last(s, root)
    }

    /// Moves to the first entry.
    pub fn first<S: PageSource>(&mut self, s: &S, root: Root) -> bool {
        self.path.clear();
        self.on = false;
        if root.page == NO_PAGE {
            return false;
        }
        self.descend(s, root.page, root.depth, |_| 0);
        self.settle_forward(s)
    }

    /// Moves to the last entry.
    pub fn last<S: PageSource>(&mut self, s: &S, root: Root) -> bool {
        self.path.clear();
        self.on = false;
        if root.page == NO_PAGE {
            return false;
        }
        self.descend(s, root.page, root.depth, |p| {
            if p.kind() == super::page::LEAF {
                p.n().saturating_sub(1)
            } else {
                p.n()
            }
        });
        let (off, i) = *self.path.last().expect("a leaf");
        self.on = i < s.page(off).n();
        self.on
    }

    /// After a descent that may stand past a leaf's last entry: moves to the next entry.
    fn settle_forward<S: PageSource>(&mut self, s: &S) -> bool {
        let (off, i) = *self.path.last().expect("a leaf");
        if i < s.page(off).n() {
            self.on = true;
            return true;
        }
        self.climb_next(s)
    }

    /// Leaves the current leaf for the first entry of the next one.
    fn climb_next<S: PageSource>(&mut self, s: &S) -> bool {
        let leaf_level = self.path.len();
        self.path.pop();
        while let Some(&(off, c)) = self.path.last() {
            let p = s.page(off);
            if c < p.n() {
                self.path.last_mut().expect("a branch").1 = c + 1;
                let child = p.child(c + 1).0;
                let level = (leaf_level - self.path.len() - 1) as u32;
                self.descend(s, child, level, |_| 0);
                return self.settle_forward(s);
            }
            self.path.pop();
        }
        self.on = false;
        false
    }

    /// Moves to entry `i` of the leaf the cursor stands in: a walk that reads a leaf's
    /// entries itself (one page check per leaf, no step per entry) hands the cursor the
    /// leaf's last position before stepping off it.
    pub fn set_leaf_index(&mut self, i: usize) {
        if let Some(l) = self.path.last_mut() {
            l.1 = i;
        }
    }

    /// Steps to the next entry.
    pub fn next<S: PageSource>(&mut self, s: &S) -> bool {
        if !self.on {
            return false;
        }
        self.path.last_mut().expect("a leaf").1 += 1;
        self.settle_forward(s)
    }

    /// Steps to the previous entry.
    pub fn prev<S: PageSource>(&mut self, s: &S) -> bool {
        if self.path.is_empty() {
            return false;
        }
        let leaf = self.path.last_mut().expect("a leaf");
        if leaf.1 > 0 {
            leaf.1 -= 1;
            self.on = true;
            return true;
        }
        let leaf_level = self.path.len();
        self.path.pop();
        while let Some(&(off, c)) = self.path.last() {
            if c > 0 {
                self.path.last_mut().expect("a branch").1 = c - 1;
                let child = s.page(off).child(c - 1).0;
                let level = (leaf_level - self.path.len() - 1) as u32;
                self.descend(s, child, level, |p| {
                    if p.kind() == super::page::LEAF {
                        p.n().saturating_sub(1)
                    } else {
                        p.n()
                    }
                });
                let (off, i) = *self.path.last().expect("a leaf");
                self.on = i < s.page(off).n();
                return self.on;
            }
            self.path.pop();
        }
        self.on = false;
        false
    }
}

/// Whether entry `i` of leaf `off` has `key`.
fn is_at<S: PageSource>(s: &S, off: u64, i: usize, key: &[u8]) -> bool {
    let rest = |first, len| read_key(s, first, len);
    let p = s.page(off);
    p.cmp_entry(i, key, p.head_of(key), &rest).is_eq()
}

impl Default for Cursor {
    fn default() -> Self {
        Cursor::new()
    }
}

/// The number of entries whose key is below `key`.
pub fn rank<S: PageSource>(s: &S, root: Root, key: &[u8]) -> u64 {
    if root.page == NO_PAGE {
        return 0;
    }
    let mut off = root.page;
    let mut below = 0;
    let rest = |first, len| read_key(s, first, len);
    for _ in 0..root.depth {
        let p = s.page(off);
        let c = p.child_index(key, &rest);
        below += (0..c).map(|j| p.child(j).1).sum::<u64>();
        off = p.child(c).0;
    }
    let p = s.page(off);
    below
        + match p.search(key, &rest) {
            Ok(i) | Err(i) => i as u64,
        }
}

/// The number of entries with `lo <= key < hi` (no bound where `None`).
pub fn count_range<S: PageSource>(s: &S, root: Root, lo: Option<&[u8]>, hi: Option<&[u8]>) -> u64 {
    let top = hi.map_or(root.count, |h| rank(s, root, h));
    let bottom = lo.map_or(0, |l| rank(s, root, l));
    top.saturating_sub(bottom)
}

#[cfg(test)]
mod tests {
    use super::super::page::PageBuf;
    use super::super::tree::tests::{rng, Mem};
    use super::super::tree::{PutMode, WriteTxn};
    use super::*;
    use std::collections::{BTreeMap, HashMap};

    fn key_of(c: &Cursor, s: &Mem) -> Vec<u8> {
        let (off, i) = c.at().unwrap();
        s.page(off).key_of(i, &|f, l| read_key(s, f, l)).unwrap()
    }

    #[test]
    fn cursors_and_ranks_agree_with_a_btreemap() {
        for seed0 in 1..6u64 {
            let mut seed = seed0.wrapping_mul(0x2545_f491_4f6c_dd1d);
            let mut pages: HashMap<u64, PageBuf> = HashMap::new();
            let mut next = 0u64;
            let mut model = BTreeMap::new();
            let mut t = WriteTxn::new(
                Mem {
                    pages: &pages,
                    next: &mut next,
                    free: Vec::new(),
                    direct: HashMap::new(),
                },
                Root::default(),
            );
            for _ in 0..6000 {
                let r = rng(&mut seed);
                // Some keys are kept out of line, many sharing their first 64 bytes.
                let key = format!("{:x}", r % 5000).repeat(1 + (r >> 40) as usize % 30);
                let key = if (r >> 32) % 8 == 0 {
                    format!("{:0>1200}", key)
                } else {
                    key
                };
                let key = key.into_bytes();
                if (r >> 60) % 5 == 0 {
                    t.remove(&key).unwrap();
                    model.remove(&key);
                } else {
                    t.put(&key, b"v", PutMode::Upsert).unwrap();
                    model.insert(key, ());
                }
            }
            let (store, f) = t.finish();
            let direct = store.direct;
            pages.extend(f.written);
            pages.extend(direct);
            let root = f.root;
            assert!(root.depth >= 1, "seed {seed0}");
            let s = Mem {
                pages: &pages,
                next: &mut next,
                free: Vec::new(),
                direct: HashMap::new(),
            };
            let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
            // Forward and backward walks.
            let mut c = Cursor::new();
            let mut got = Vec::new();
            let mut ok = c.first(&s, root);
            while ok {
                got.push(key_of(&c, &s));
                ok = c.next(&s);
            }
            assert_eq!(got, keys, "seed {seed0}: forward");
            got.clear();
            ok = c.last(&s, root);
            while ok {
                got.push(key_of(&c, &s));
                ok = c.prev(&s);
            }
            got.reverse();
            assert_eq!(got, keys, "seed {seed0}: backward");
            // Seeks and ranks at probe keys, present and absent.
            for _ in 0..500 {
                let r = rng(&mut seed);
                let probe = format!("{:x}", r % 5200).repeat(1 + (r >> 40) as usize % 30);
                let probe = if (r >> 32) % 8 == 0 {
                    format!("{:0>1200}", probe)
                } else {
                    probe
                };
                let probe = probe.into_bytes();
                let ge = model.range(probe.clone()..).next().map(|(k, _)| k.clone());
                let le = model
                    .range(..=probe.clone())
                    .next_back()
                    .map(|(k, _)| k.clone());
                assert_eq!(c.seek_ge(&s, root, &probe).then(|| key_of(&c, &s)), ge);
                assert_eq!(c.seek_le(&s, root, &probe).then(|| key_of(&c, &s)), le);
                assert_eq!(c.seek_exact(&s, root, &probe), model.contains_key(&probe));
                let below = model.range(..probe.clone()).count() as u64;
                assert_eq!(rank(&s, root, &probe), below, "seed {seed0}");
                let r2 = rng(&mut seed);
                let hi = format!("{:x}", r2 % 5200).into_bytes();
                let want = if probe < hi {
                    model.range(probe.clone()..hi.clone()).count() as u64
                } else {
                    0
                };
                assert_eq!(count_range(&s, root, Some(&probe), Some(&hi)), want);
                // A step from a seek continues in order.
                if c.seek_ge(&s, root, &probe) && c.next(&s) {
                    let after = model.range(probe.clone()..).nth(1).map(|(k, _)| k.clone());
                    assert_eq!(Some(key_of(&c, &s)), after);
                }
            }
        }
    }
}
