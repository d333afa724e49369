//! Cursors and iterators over a snapshot of an ordered map.

use super::{Form, Snapshot};
use crate::error::{Error, Result};
use crate::kinds::ordered::cursor::Cursor as TreeCursor;
use crate::kinds::ordered::keys;
use crate::kinds::ordered::map::Step;

/// A position in a [`Snapshot`]: seeks, steps both ways, and where it stands
/// ([`Snapshot::cursor`]). Every move returns whether the cursor stands on an entry; it
/// then holds that entry's key and value. In a multimap each (key, value) pair is an
/// entry, in key order and then value order, and the `*_key` and `*_value` moves go
/// between keys and among one key's values.
pub struct OrderedCursor<'a> {
    snap: &'a Snapshot<'a>,
    c: TreeCursor,
    /// The entry it stands on: the tree's key, and the user's key and value.
    at: Option<(Vec<u8>, Vec<u8>, Vec<u8>)>,
}

impl<'a> OrderedCursor<'a> {
    pub(super) fn new(snap: &'a Snapshot<'a>) -> OrderedCursor<'a> {
        OrderedCursor {
            snap,
            c: TreeCursor::new(),
            at: None,
        }
    }

    fn form(&self) -> Form<'a> {
        self.snap.map.form()
    }

    fn go(&mut self, how: Step<'_>) -> Result<bool> {
        let sh = &*self.snap.map.sh;
        let on = self.snap.snap.step(sh, &mut self.c, how)?;
        self.at = None;
        if on {
            if let Some((k, v)) = self.snap.snap.entry_at(sh, &self.c)? {
                let (uk, uv) = match self.form().decode(&k, &v)? {
                    Some(kv) => kv,
                    None => (k.clone(), v),
                };
                self.at = Some((k, uk, uv));
            }
        }
        Ok(self.at.is_some())
    }

    /// Moves to the first entry.
    pub fn first(&mut self) -> Result<bool> {
        self.go(Step::First)
    }

    /// Moves to the last entry.
    pub fn last(&mut self) -> Result<bool> {
        self.go(Step::Last)
    }

    /// Moves to `key` if it is there (in a multimap, to its first value); else the
    /// cursor stands on nothing.
    pub fn seek(&mut self, key: &[u8]) -> Result<bool> {
        if !self.seek_ge(key)? || self.key() != Some(key) {
            self.at = None;
        }
        Ok(self.at.is_some())
    }

    /// Moves to the first entry whose key is at least `key` (in a multimap, that key's
    /// first value).
    pub fn seek_ge(&mut self, key: &[u8]) -> Result<bool> {
        let k = self.form().key(key)?;
        self.go(Step::Ge(&k))
    }

    /// Moves to the last entry whose key is at most `key` (in a multimap, that key's last
    /// value).
    pub fn seek_le(&mut self, key: &[u8]) -> Result<bool> {
        let form = self.form();
        if !form.dups() {
            let k = form.key(key)?;
            return self.go(Step::Le(&k));
        }
        // The span's end is no pair's key: the last entry below it is the key's last
        // value, or the last pair of a smaller key.
        let (_, end) = form.key_span(key)?;
        self.go(Step::Le(&end))?;
        if self.at.as_ref().is_some_and(|(k, _, _)| *k == end) {
            return self.move_prev();
        }
        Ok(self.at.is_some())
    }

    /// Moves to the next entry.
    pub fn move_next(&mut self) -> Result<bool> {
        self.go(Step::Next)
    }

    /// Moves to the previous entry.
    pub fn move_prev(&mut self) -> Result<bool> {
        self.go(Step::Prev)
    }

    /// The key of the entry the cursor stands on.
    pub fn key(&self) -> Option<&[u8]> {
        self.at.as_ref().map(|(_, k, _)| k.as_slice())
    }

    /// The value of the entry the cursor stands on.
    pub fn value(&self) -> Option<&[u8]> {
        self.at.as_ref().map(|(_, _, v)| v.as_slice())
    }

    /// The key and value of the entry the cursor stands on.
    pub fn entry(&self) -> Option<(&[u8], &[u8])> {
        self.at
            .as_ref()
            .map(|(_, k, v)| (k.as_slice(), v.as_slice()))
    }

    /// Where the cursor stands: the number of entries before its entry (0 for the
    /// first), in time logarithmic in the map's size; `None` on no entry.
    pub fn position(&self) -> Result<Option<u64>> {
        match &self.at {
            None => Ok(None),
            Some((k, _, _)) => self.snap.snap.rank(&self.snap.map.sh, k).map(Some),
        }
    }

    fn dups(&self) -> Result<Form<'a>> {
        let form = self.form();
        if !form.dups() {
            return Err(Error::InvalidArgument(format!(
                "ordered map {:?} has no duplicates: moves among a key's values need a multimap",
                self.snap.map.name
            )));
        }
        Ok(form)
    }

    /// Multimap: moves to the first value of the next key.
    pub fn next_key(&mut self) -> Result<bool> {
        let form = self.dups()?;
        let Some((_, key, _)) = &self.at else {
            return Ok(false);
        };
        let (_, end) = form.key_span(key)?;
        self.go(Step::Ge(&end))
    }

    /// Multimap: moves to the last value of the previous key.
    pub fn prev_key(&mut self) -> Result<bool> {
        let form = self.dups()?;
        let Some((_, key, _)) = &self.at else {
            return Ok(false);
        };
        let (start, _) = form.key_span(key)?;
        self.go(Step::Le(&start))?;
        // `start` is no pair's key either: what stands at or below it is a smaller key's.
        if self.at.as_ref().is_some_and(|(k, _, _)| *k == start) {
            return self.move_prev();
        }
        Ok(self.at.is_some())
    }

    /// Multimap: moves to the next value of the same key; at its last value, stays there
    /// and returns false.
    pub fn next_value(&mut self) -> Result<bool> {
        self.among_values(true)
    }

    /// Multimap: moves to the previous value of the same key; at its first value, stays
    /// there and returns false.
    pub fn prev_value(&mut self) -> Result<bool> {
        self.among_values(false)
    }

    fn among_values(&mut self, forward: bool) -> Result<bool> {
        self.dups()?;
        let Some((_, key, _)) = self.at.clone() else {
            return Ok(false);
        };
        let (c, at) = (self.c.clone(), self.at.clone());
        let moved = if forward {
            self.move_next()?
        } else {
            self.move_prev()?
        };
        if moved && self.key() == Some(key.as_slice()) {
            return Ok(true);
        }
        self.c = c;
        self.at = at;
        Ok(false)
    }

    /// Multimap: moves to the pair (`key`, `value`) if it is there; else the cursor stands
    /// on nothing.
    pub fn seek_value(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        if !self.seek_value_ge(key, value)? || self.entry() != Some((key, value)) {
            self.at = None;
        }
        Ok(self.at.is_some())
    }

    /// Multimap: moves to the first value of `key` that is at least `value`; else the
    /// cursor stands on nothing.
    pub fn seek_value_ge(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        let form = self.dups()?;
        let (pair, _) = form.entry(key, value)?;
        self.go(Step::Ge(&pair))?;
        if self.key() != Some(key) {
            self.at = None;
        }
        Ok(self.at.is_some())
    }

    /// The number of values of the key the cursor stands on (1 in a map without
    /// duplicates); 0 on no entry.
    pub fn count_values(&self) -> Result<u64> {
        match self.key() {
            None => Ok(0),
            Some(k) => self.snap.count_values(k),
        }
    }
}

/// The entries of a range of a [`Snapshot`], in key order, or from the end with
/// [`DoubleEndedIterator::next_back`] ([`Snapshot::iter`], [`Snapshot::prefix`]). Each
/// item is a `Result`: a corrupt page ends the iteration with its error.
pub struct OrderedIter<'a> {
    front: OrderedCursor<'a>,
    back: OrderedCursor<'a>,
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
    /// Entries not yet returned from either end (from the counts, so the two ends never
    /// pass each other and a corrupt tree cannot make the walk endless).
    left: u64,
    started: (bool, bool),
}

impl<'a> OrderedIter<'a> {
    /// `lo` and `hi` are tree keys.
    pub(super) fn new(
        snap: &'a Snapshot<'a>,
        lo: Option<Vec<u8>>,
        hi: Option<Vec<u8>>,
    ) -> Result<OrderedIter<'a>> {
        let left = snap
            .snap
            .count_range(&snap.map.sh, lo.as_deref(), hi.as_deref())?;
        Ok(OrderedIter {
            front: OrderedCursor::new(snap),
            back: OrderedCursor::new(snap),
            lo,
            hi,
            left,
            started: (false, false),
        })
    }

    fn take(&mut self, front: bool) -> Option<Result<(Vec<u8>, Vec<u8>)>> {
        if self.left == 0 {
            return None;
        }
        let r = if front {
            let c = &mut self.front;
            if self.started.0 {
                c.move_next()
            } else {
                self.started.0 = true;
                match &self.lo {
                    Some(lo) => c.go(Step::Ge(lo)),
                    None => c.first(),
                }
            }
        } else {
            let c = &mut self.back;
            if self.started.1 {
                c.move_prev()
            } else {
                self.started.1 = true;
                match &self.hi {
                    // The last entry below `hi`.
                    Some(hi) => c.go(Step::Le(hi)).and_then(|on| {
                        if on && c.at.as_ref().is_some_and(|(k, _, _)| k == hi) {
                            c.move_prev()
                        } else {
                            Ok(on)
                        }
                    }),
                    None => c.last(),
                }
            }
        };
        let c = if front { &self.front } else { &self.back };
        match r {
            Ok(true) => {
                self.left -= 1;
                c.entry().map(|(k, v)| Ok((k.to_vec(), v.to_vec())))
            }
            Ok(false) => {
                self.left = 0;
                Some(Err(self.front.snap.map.sh.corrupt(
                    "ordered map: a range ended before its count of entries",
                )))
            }
            Err(e) => {
                self.left = 0;
                Some(Err(e))
            }
        }
    }
}

impl Iterator for OrderedIter<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.take(true)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.left).unwrap_or(usize::MAX);
        (0, Some(n))
    }
}

impl DoubleEndedIterator for OrderedIter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.take(false)
    }
}

/// The smallest byte string above every string that starts with `p`; `None` if there is
/// none (`p` is all 0xFF bytes, or empty).
pub(super) fn prefix_end(p: &[u8]) -> Option<Vec<u8>> {
    let mut end = p.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The tree keys bounding every entry whose user key starts with `p`, in a map of `form`.
pub(super) fn prefix_bounds(form: &Form<'_>, p: &[u8]) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
    if form.flags & crate::format::OF_U64_KEYS != 0 {
        return Err(Error::InvalidArgument(
            "prefix scans need keys of bytes; this ordered map has integer keys: use a range"
                .into(),
        ));
    }
    // Escaping maps each byte on its own, so escaped keys that start with `p` are the
    // escaped keys that start with `p` escaped (and no terminator).
    let lo = if form.dups() {
        let mut e = keys::dup_prefix(p);
        e.truncate(e.len() - 2);
        e
    } else {
        p.to_vec()
    };
    let hi = prefix_end(&lo);
    Ok((lo, hi))
}
