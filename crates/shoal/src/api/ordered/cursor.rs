//! Cursors and iterators over a snapshot of an ordered map.

use super::{Form, Snapshot};
use crate::error::{Error, Result};
use crate::kinds::ordered::cursor::Cursor as TreeCursor;
use crate::kinds::ordered::keys;
use crate::kinds::ordered::map::Step;
use crate::kinds::ordered::map::Write;

/// What a cursor reads: a snapshot's tree, or a write transaction's own.
pub(super) trait Source {
    /// How the map's keys and values are the tree's entries.
    fn form(&self) -> Form<'_>;
    /// The map, for messages.
    fn what(&self) -> String;
    /// Moves `c` as `how` says; whether it stands on an entry.
    fn step(&self, c: &mut TreeCursor, how: Step<'_>) -> Result<bool>;
    /// The tree entry `c` stands on.
    fn entry_at(&self, c: &TreeCursor) -> Result<Option<(Vec<u8>, Vec<u8>)>>;
    /// Entries below tree key `k`.
    fn rank(&self, k: &[u8]) -> Result<u64>;
    /// Entries with tree keys in `[lo, hi)`.
    fn count_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<u64>;
    /// Moves on whenever the tree changes (a snapshot's never does).
    fn changes(&self) -> u64;
    /// The error for a tree that contradicts its own counts.
    fn corrupt(&self, what: &str) -> Error;
}

impl Source for &Snapshot<'_> {
    fn form(&self) -> Form<'_> {
        self.map.form()
    }
    fn what(&self) -> String {
        format!("ordered map {:?}", self.map.name)
    }
    fn step(&self, c: &mut TreeCursor, how: Step<'_>) -> Result<bool> {
        self.snap.step(&self.map.sh, c, how)
    }
    fn entry_at(&self, c: &TreeCursor) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.snap.entry_at(&self.map.sh, c)
    }
    fn rank(&self, k: &[u8]) -> Result<u64> {
        self.snap.rank(&self.map.sh, k)
    }
    fn count_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<u64> {
        self.snap.count_range(&self.map.sh, lo, hi)
    }
    fn changes(&self) -> u64 {
        0
    }
    fn corrupt(&self, what: &str) -> Error {
        self.map.sh.corrupt(what)
    }
}

impl Source for &Write<'_> {
    fn form(&self) -> Form<'_> {
        Form::of(self)
    }
    fn what(&self) -> String {
        format!("ordered map {}", self.m.id)
    }
    fn step(&self, c: &mut TreeCursor, how: Step<'_>) -> Result<bool> {
        Ok(Write::step(self, c, how))
    }
    fn entry_at(&self, c: &TreeCursor) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        Write::entry_at(self, c)
    }
    fn rank(&self, k: &[u8]) -> Result<u64> {
        Ok(Write::rank(self, k))
    }
    fn count_range(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> Result<u64> {
        Ok(Write::count_range(self, lo, hi))
    }
    fn changes(&self) -> u64 {
        self.changes
    }
    fn corrupt(&self, what: &str) -> Error {
        Form::of(self).sh.corrupt(what)
    }
}

/// A cursor's state, whatever it reads (the snapshot's and the write transaction's
/// cursors are this core and the tree they read).
#[derive(Clone, Default)]
pub(super) struct Core {
    c: TreeCursor,
    /// The entry it stands on: the tree's key, and the user's key and value.
    at: Option<(Vec<u8>, Vec<u8>, Vec<u8>)>,
    /// Where the entry it stood on was, before a write removed it: the next move forward
    /// goes to the first entry after it, the next move back to the last before it.
    gap: Option<Vec<u8>>,
    /// The tree's [`Source::changes`] when `c` was last valid for it.
    changes: u64,
}

impl Core {
    pub(super) fn go(&mut self, src: &impl Source, how: Step<'_>) -> Result<bool> {
        self.gap = None;
        self.at = None;
        self.changes = src.changes();
        let on = src.step(&mut self.c, how)?;
        if on {
            if let Some((k, v)) = src.entry_at(&self.c)? {
                let (uk, uv) = match src.form().decode(&k, &v)? {
                    Some(kv) => kv,
                    None => (k.clone(), v),
                };
                self.at = Some((k, uk, uv));
            }
        }
        Ok(self.at.is_some())
    }

    /// Finds the cursor's place again after the tree changed under it (by a write of the
    /// transaction it reads): its path may name pages the write copied or freed, so it
    /// seeks its key. Its entry, if still there, is read again (the write may have
    /// changed the value); if gone, the cursor stands in the gap the entry left.
    pub(super) fn resync(&mut self, src: &impl Source) -> Result<()> {
        if self.changes == src.changes() {
            return Ok(());
        }
        self.changes = src.changes();
        self.c = TreeCursor::new();
        // A cursor in a gap stays there (an entry put back into it is what its next move
        // either way finds); one on nothing stays on nothing.
        let Some((k, _, _)) = self.at.take() else {
            return Ok(());
        };
        if !self.go(src, Step::Ge(&k))? || self.at.as_ref().is_none_or(|(t, _, _)| *t != k) {
            self.at = None;
            self.c = TreeCursor::new();
            self.gap = Some(k);
        }
        Ok(())
    }

    pub(super) fn seek(&mut self, src: &impl Source, key: &[u8]) -> Result<bool> {
        if !self.seek_ge(src, key)? || self.key() != Some(key) {
            self.at = None;
        }
        Ok(self.at.is_some())
    }

    pub(super) fn seek_ge(&mut self, src: &impl Source, key: &[u8]) -> Result<bool> {
        let k = src.form().key(key)?;
        self.go(src, Step::Ge(&k))
    }

    pub(super) fn seek_le(&mut self, src: &impl Source, key: &[u8]) -> Result<bool> {
        let form = src.form();
        if !form.dups() {
            let k = form.key(key)?;
            return self.go(src, Step::Le(&k));
        }
        // The span's end is no pair's key: the last entry below it is the key's last
        // value, or the last pair of a smaller key.
        let (_, end) = form.key_span(key)?;
        self.go(src, Step::Le(&end))?;
        if self.at.as_ref().is_some_and(|(k, _, _)| *k == end) {
            return self.go(src, Step::Prev);
        }
        Ok(self.at.is_some())
    }

    pub(super) fn move_next(&mut self, src: &impl Source) -> Result<bool> {
        match self.gap.take() {
            Some(k) => self.go(src, Step::Ge(&k)),
            None => self.go(src, Step::Next),
        }
    }

    pub(super) fn move_prev(&mut self, src: &impl Source) -> Result<bool> {
        match self.gap.take() {
            Some(k) => self.go(src, Step::Le(&k)),
            None => self.go(src, Step::Prev),
        }
    }

    pub(super) fn key(&self) -> Option<&[u8]> {
        self.at.as_ref().map(|(_, k, _)| k.as_slice())
    }

    pub(super) fn value(&self) -> Option<&[u8]> {
        self.at.as_ref().map(|(_, _, v)| v.as_slice())
    }

    pub(super) fn entry(&self) -> Option<(&[u8], &[u8])> {
        self.at
            .as_ref()
            .map(|(_, k, v)| (k.as_slice(), v.as_slice()))
    }

    /// The tree key of the entry it stands on.
    pub(super) fn tree_key(&self) -> Option<&[u8]> {
        self.at.as_ref().map(|(k, _, _)| k.as_slice())
    }

    pub(super) fn position(&self, src: &impl Source) -> Result<Option<u64>> {
        match &self.at {
            None => Ok(None),
            Some((k, _, _)) => src.rank(k).map(Some),
        }
    }

    fn dups<'s>(src: &'s impl Source) -> Result<Form<'s>> {
        let form = src.form();
        if !form.dups() {
            return Err(Error::InvalidArgument(format!(
                "{} has no duplicates: moves among a key's values need a multimap",
                src.what()
            )));
        }
        Ok(form)
    }

    pub(super) fn next_key(&mut self, src: &impl Source) -> Result<bool> {
        let form = Core::dups(src)?;
        if self.gap.is_some() {
            return self.move_next(src);
        }
        let Some((_, key, _)) = &self.at else {
            return Ok(false);
        };
        let (_, end) = form.key_span(key)?;
        self.go(src, Step::Ge(&end))
    }

    pub(super) fn prev_key(&mut self, src: &impl Source) -> Result<bool> {
        let form = Core::dups(src)?;
        if self.gap.is_some() {
            return self.move_prev(src);
        }
        let Some((_, key, _)) = &self.at else {
            return Ok(false);
        };
        let (start, _) = form.key_span(key)?;
        self.go(src, Step::Le(&start))?;
        // `start` is no pair's key either: what stands at or below it is a smaller key's.
        if self.at.as_ref().is_some_and(|(k, _, _)| *k == start) {
            return self.go(src, Step::Prev);
        }
        Ok(self.at.is_some())
    }

    pub(super) fn among_values(&mut self, src: &impl Source, forward: bool) -> Result<bool> {
        Core::dups(src)?;
        let Some((_, key, _)) = self.at.clone() else {
            return Ok(false);
        };
        let (c, at) = (self.c.clone(), self.at.clone());
        let moved = self.go(src, if forward { Step::Next } else { Step::Prev })?;
        if moved && self.key() == Some(key.as_slice()) {
            return Ok(true);
        }
        self.c = c;
        self.at = at;
        Ok(false)
    }

    pub(super) fn seek_value(
        &mut self,
        src: &impl Source,
        key: &[u8],
        value: &[u8],
    ) -> Result<bool> {
        if !self.seek_value_ge(src, key, value)? || self.entry() != Some((key, value)) {
            self.at = None;
        }
        Ok(self.at.is_some())
    }

    pub(super) fn seek_value_ge(
        &mut self,
        src: &impl Source,
        key: &[u8],
        value: &[u8],
    ) -> Result<bool> {
        let form = Core::dups(src)?;
        let (pair, _) = form.entry(key, value)?;
        self.go(src, Step::Ge(&pair))?;
        if self.key() != Some(key) {
            self.at = None;
        }
        Ok(self.at.is_some())
    }

    pub(super) fn count_values(&self, src: &impl Source) -> Result<u64> {
        match self.key() {
            None => Ok(0),
            Some(k) => {
                let (lo, hi) = src.form().key_span(k)?;
                src.count_range(Some(&lo), Some(&hi))
            }
        }
    }
}

/// The moves and reads of a cursor, the same over a snapshot and over a write
/// transaction: each type gives `parts` (its core and what it reads).
macro_rules! cursor_moves {
    () => {
        /// Moves to the first entry.
        pub fn first(&mut self) -> Result<bool> {
            let (core, src) = self.parts();
            core.go(&src, Step::First)
        }

        /// Moves to the last entry.
        pub fn last(&mut self) -> Result<bool> {
            let (core, src) = self.parts();
            core.go(&src, Step::Last)
        }

        /// Moves to `key` if it is there (in a multimap, to its first value); else the
        /// cursor stands on nothing.
        pub fn seek(&mut self, key: &[u8]) -> Result<bool> {
            let (core, src) = self.parts();
            core.seek(&src, key)
        }

        /// Moves to the first entry whose key is at least `key` (in a multimap, that
        /// key's first value).
        pub fn seek_ge(&mut self, key: &[u8]) -> Result<bool> {
            let (core, src) = self.parts();
            core.seek_ge(&src, key)
        }

        /// Moves to the last entry whose key is at most `key` (in a multimap, that key's
        /// last value).
        pub fn seek_le(&mut self, key: &[u8]) -> Result<bool> {
            let (core, src) = self.parts();
            core.seek_le(&src, key)
        }

        /// Moves to the next entry.
        pub fn move_next(&mut self) -> Result<bool> {
            let (core, src) = self.parts();
            core.move_next(&src)
        }

        /// Moves to the previous entry.
        pub fn move_prev(&mut self) -> Result<bool> {
            let (core, src) = self.parts();
            core.move_prev(&src)
        }

        /// The key of the entry the cursor stands on.
        pub fn key(&self) -> Option<&[u8]> {
            self.core.key()
        }

        /// The value of the entry the cursor stands on.
        pub fn value(&self) -> Option<&[u8]> {
            self.core.value()
        }

        /// The key and value of the entry the cursor stands on.
        pub fn entry(&self) -> Option<(&[u8], &[u8])> {
            self.core.entry()
        }

        /// Where the cursor stands: the number of entries before its entry (0 for the
        /// first), in time logarithmic in the map's size; `None` on no entry.
        pub fn position(&self) -> Result<Option<u64>> {
            self.core.position(&self.source())
        }

        /// Multimap: moves to the first value of the next key.
        pub fn next_key(&mut self) -> Result<bool> {
            let (core, src) = self.parts();
            core.next_key(&src)
        }

        /// Multimap: moves to the last value of the previous key.
        pub fn prev_key(&mut self) -> Result<bool> {
            let (core, src) = self.parts();
            core.prev_key(&src)
        }

        /// Multimap: moves to the next value of the same key; at its last value, stays
        /// there and returns false.
        pub fn next_value(&mut self) -> Result<bool> {
            let (core, src) = self.parts();
            core.among_values(&src, true)
        }

        /// Multimap: moves to the previous value of the same key; at its first value,
        /// stays there and returns false.
        pub fn prev_value(&mut self) -> Result<bool> {
            let (core, src) = self.parts();
            core.among_values(&src, false)
        }

        /// Multimap: moves to the pair (`key`, `value`) if it is there; else the cursor
        /// stands on nothing.
        pub fn seek_value(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
            let (core, src) = self.parts();
            core.seek_value(&src, key, value)
        }

        /// Multimap: moves to the first value of `key` that is at least `value`; else the
        /// cursor stands on nothing.
        pub fn seek_value_ge(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
            let (core, src) = self.parts();
            core.seek_value_ge(&src, key, value)
        }

        /// The number of values of the key the cursor stands on (1 in a map without
        /// duplicates); 0 on no entry.
        pub fn count_values(&self) -> Result<u64> {
            self.core.count_values(&self.source())
        }
    };
}

/// The moves and reads of every ordered-map cursor, [`OrderedCursor`] and
/// [`WriteCursor`] (whose own methods say what each does), for code that takes either:
/// `&mut dyn CursorMoves`.
pub trait CursorMoves {
    /// See [`OrderedCursor::first`].
    fn first(&mut self) -> Result<bool>;
    /// See [`OrderedCursor::last`].
    fn last(&mut self) -> Result<bool>;
    /// See [`OrderedCursor::seek`].
    fn seek(&mut self, key: &[u8]) -> Result<bool>;
    /// See [`OrderedCursor::seek_ge`].
    fn seek_ge(&mut self, key: &[u8]) -> Result<bool>;
    /// See [`OrderedCursor::seek_le`].
    fn seek_le(&mut self, key: &[u8]) -> Result<bool>;
    /// See [`OrderedCursor::move_next`].
    fn move_next(&mut self) -> Result<bool>;
    /// See [`OrderedCursor::move_prev`].
    fn move_prev(&mut self) -> Result<bool>;
    /// See [`OrderedCursor::entry`].
    fn entry(&self) -> Option<(&[u8], &[u8])>;
    /// See [`OrderedCursor::position`].
    fn position(&self) -> Result<Option<u64>>;
    /// See [`OrderedCursor::next_key`].
    fn next_key(&mut self) -> Result<bool>;
    /// See [`OrderedCursor::prev_key`].
    fn prev_key(&mut self) -> Result<bool>;
    /// See [`OrderedCursor::next_value`].
    fn next_value(&mut self) -> Result<bool>;
    /// See [`OrderedCursor::prev_value`].
    fn prev_value(&mut self) -> Result<bool>;
    /// See [`OrderedCursor::seek_value`].
    fn seek_value(&mut self, key: &[u8], value: &[u8]) -> Result<bool>;
    /// See [`OrderedCursor::seek_value_ge`].
    fn seek_value_ge(&mut self, key: &[u8], value: &[u8]) -> Result<bool>;
    /// See [`OrderedCursor::count_values`].
    fn count_values(&self) -> Result<u64>;
}

/// [`CursorMoves`] for a cursor type, by its own methods of the same names.
macro_rules! impl_cursor_moves {
    ($t:ty) => {
        impl CursorMoves for $t {
            fn first(&mut self) -> Result<bool> {
                <$t>::first(self)
            }
            fn last(&mut self) -> Result<bool> {
                <$t>::last(self)
            }
            fn seek(&mut self, key: &[u8]) -> Result<bool> {
                <$t>::seek(self, key)
            }
            fn seek_ge(&mut self, key: &[u8]) -> Result<bool> {
                <$t>::seek_ge(self, key)
            }
            fn seek_le(&mut self, key: &[u8]) -> Result<bool> {
                <$t>::seek_le(self, key)
            }
            fn move_next(&mut self) -> Result<bool> {
                <$t>::move_next(self)
            }
            fn move_prev(&mut self) -> Result<bool> {
                <$t>::move_prev(self)
            }
            fn entry(&self) -> Option<(&[u8], &[u8])> {
                <$t>::entry(self)
            }
            fn position(&self) -> Result<Option<u64>> {
                <$t>::position(self)
            }
            fn next_key(&mut self) -> Result<bool> {
                <$t>::next_key(self)
            }
            fn prev_key(&mut self) -> Result<bool> {
                <$t>::prev_key(self)
            }
            fn next_value(&mut self) -> Result<bool> {
                <$t>::next_value(self)
            }
            fn prev_value(&mut self) -> Result<bool> {
                <$t>::prev_value(self)
            }
            fn seek_value(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
                <$t>::seek_value(self, key, value)
            }
            fn seek_value_ge(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
                <$t>::seek_value_ge(self, key, value)
            }
            fn count_values(&self) -> Result<u64> {
                <$t>::count_values(self)
            }
        }
    };
}

impl_cursor_moves!(OrderedCursor<'_>);
impl_cursor_moves!(WriteCursor<'_, '_>);

/// A position in a [`Snapshot`]: seeks, steps both ways, and where it stands
/// ([`Snapshot::cursor`]). Every move returns whether the cursor stands on an entry; it
/// then holds that entry's key and value. In a multimap each (key, value) pair is an
/// entry, in key order and then value order, and the `*_key` and `*_value` moves go
/// between keys and among one key's values.
pub struct OrderedCursor<'a> {
    snap: &'a Snapshot<'a>,
    core: Core,
}

impl<'a> OrderedCursor<'a> {
    pub(super) fn new(snap: &'a Snapshot<'a>) -> OrderedCursor<'a> {
        OrderedCursor {
            snap,
            core: Core::default(),
        }
    }

    fn parts(&mut self) -> (&mut Core, &'a Snapshot<'a>) {
        (&mut self.core, self.snap)
    }

    fn source(&self) -> &'a Snapshot<'a> {
        self.snap
    }

    cursor_moves!();
}

/// A position in a write transaction's map, reading the map as the transaction has it:
/// its own writes (and those of its nested transactions still open or committed into
/// it) included, those of nested transactions aborted gone ([`WriteTxn::cursor`](super::WriteTxn::cursor),
/// [`MultiWriteTxn::cursor`](super::MultiWriteTxn::cursor)). It moves as an [`OrderedCursor`] does, and writes at
/// where it stands ([`WriteCursor::put_current`], [`WriteCursor::remove_current`]).
///
/// It borrows the transaction exclusively, so the transaction writes only through it
/// while it lives. To write through the transaction between moves, keep the cursor's
/// place with [`WriteCursor::into_place`] and take it up again with
/// [`WriteTxn::cursor_at`](super::WriteTxn::cursor_at) after the writes: the cursor then stands on its entry as the
/// writes left it (its value read again), or, if they removed it, in the gap it left,
/// from which the next move forward goes to the first entry after it and the next move
/// back to the last one before it.
pub struct WriteCursor<'t, 'm> {
    w: &'t mut Write<'m>,
    core: Core,
}

/// Where a [`WriteCursor`] stood ([`WriteCursor::into_place`]), to take up again on the
/// same map of the same transaction ([`WriteTxn::cursor_at`](super::WriteTxn::cursor_at), [`MultiWriteTxn::cursor_at`](super::MultiWriteTxn::cursor_at)).
#[derive(Clone)]
pub struct CursorPlace {
    core: Core,
    map: (u64, u64),
}

impl CursorPlace {
    /// The key and value of the entry the cursor stood on when its place was kept
    /// (`None`: on no entry, or in a gap); writes since show only once it is taken up
    /// again.
    pub fn entry(&self) -> Option<(&[u8], &[u8])> {
        self.core.entry()
    }
}

impl<'t, 'm> WriteCursor<'t, 'm> {
    /// A cursor on `w`, at `place` (or on nothing).
    pub(super) fn new(w: &'t mut Write<'m>, place: Option<CursorPlace>) -> Result<Self> {
        let core = match place {
            Some(p) => {
                if p.map != (w.m.id, w.m.cat_word) {
                    return Err(Error::InvalidArgument(
                        "this cursor place is of another ordered map".into(),
                    ));
                }
                p.core
            }
            None => Core {
                changes: w.changes,
                ..Core::default()
            },
        };
        let mut c = WriteCursor { w, core };
        let (core, src) = c.parts();
        core.resync(&src)?;
        Ok(c)
    }

    fn parts(&mut self) -> (&mut Core, &Write<'m>) {
        (&mut self.core, &*self.w)
    }

    fn source(&self) -> &Write<'m> {
        self.w
    }

    cursor_moves!();

    /// Where the cursor stands, to take up again after writes through the transaction
    /// ([`WriteTxn::cursor_at`](super::WriteTxn::cursor_at)).
    pub fn into_place(self) -> CursorPlace {
        CursorPlace {
            map: (self.w.m.id, self.w.m.cat_word),
            core: self.core,
        }
    }

    /// Sets the value of the entry the cursor stands on to `value` (libmdbx's
    /// `MDB_CURRENT`); the cursor stays on it. In a multimap the pair (key, old value)
    /// gives way to (key, `value`), and the cursor stands on the new pair. False, writing
    /// nothing, if the cursor stands on no entry.
    pub fn put_current(&mut self, value: &[u8]) -> Result<bool> {
        let Some(tk) = self.core.tree_key().map(<[u8]>::to_vec) else {
            return Ok(false);
        };
        let key = self.core.key().unwrap_or_default().to_vec();
        let form = Form::of(self.w);
        // Checked before anything is removed, so that a value too large leaves the entry.
        form.entry(&key, value)?;
        if form.dups() {
            self.w.remove(&tk)?;
        }
        super::ops::put(self.w, &key, value)?;
        let (core, src) = self.parts();
        if form.dups() {
            core.seek_value(&src, &key, value)
        } else {
            core.seek(&src, &key)
        }
    }

    /// Removes the entry the cursor stands on; the cursor then stands in the gap it left
    /// (the next move forward goes to the entry after it, the next move back to the one
    /// before). False, removing nothing, if it stands on no entry.
    pub fn remove_current(&mut self) -> Result<bool> {
        let Some(tk) = self.core.tree_key().map(<[u8]>::to_vec) else {
            return Ok(false);
        };
        self.w.remove(&tk)?;
        let (core, src) = self.parts();
        core.resync(&src)?;
        Ok(true)
    }

    /// Puts `key` → `value` as [`WriteTxn::put`](super::WriteTxn::put) does, and moves the cursor to the entry
    /// (in a multimap, the pair); returns whether the key (the pair) was new.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        let new = super::ops::put(self.w, key, value)?;
        let dups = Form::of(self.w).dups();
        let (core, src) = self.parts();
        if dups {
            core.seek_value(&src, key, value)?;
        } else {
            core.seek(&src, key)?;
        }
        Ok(new)
    }
}

/// The entries of a range, in key order, or from the end: the core of [`OrderedIter`]
/// and [`WriteIter`].
struct RawIter<S> {
    src: S,
    front: Core,
    back: Core,
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
    /// Entries not yet returned from either end (from the counts, so the two ends never
    /// pass each other and a corrupt tree cannot make the walk endless).
    left: u64,
    started: (bool, bool),
}

impl<S: Source> RawIter<S> {
    /// `lo` and `hi` are tree keys.
    fn new(src: S, lo: Option<Vec<u8>>, hi: Option<Vec<u8>>) -> Result<RawIter<S>> {
        let left = src.count_range(lo.as_deref(), hi.as_deref())?;
        Ok(RawIter {
            src,
            front: Core::default(),
            back: Core::default(),
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
        let src = &self.src;
        let r = if front {
            let c = &mut self.front;
            if self.started.0 {
                c.go(src, Step::Next)
            } else {
                self.started.0 = true;
                match &self.lo {
                    Some(lo) => c.go(src, Step::Ge(lo)),
                    None => c.go(src, Step::First),
                }
            }
        } else {
            let c = &mut self.back;
            if self.started.1 {
                c.go(src, Step::Prev)
            } else {
                self.started.1 = true;
                match &self.hi {
                    // The last entry below `hi`.
                    Some(hi) => c.go(src, Step::Le(hi)).and_then(|on| {
                        if on && c.tree_key() == Some(hi.as_slice()) {
                            c.go(src, Step::Prev)
                        } else {
                            Ok(on)
                        }
                    }),
                    None => c.go(src, Step::Last),
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
                Some(Err(self.src.corrupt(
                    "ordered map: a range ended before its count of entries",
                )))
            }
            Err(e) => {
                self.left = 0;
                Some(Err(e))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.left).unwrap_or(usize::MAX);
        (0, Some(n))
    }
}

/// The entries of a range of a [`Snapshot`], in key order, or from the end with
/// [`DoubleEndedIterator::next_back`] ([`Snapshot::iter`], [`Snapshot::prefix`]). Each
/// item is a `Result`: a corrupt page ends the iteration with its error.
pub struct OrderedIter<'a>(RawIter<&'a Snapshot<'a>>);

impl<'a> OrderedIter<'a> {
    /// `lo` and `hi` are tree keys.
    pub(super) fn new(
        snap: &'a Snapshot<'a>,
        lo: Option<Vec<u8>>,
        hi: Option<Vec<u8>>,
    ) -> Result<OrderedIter<'a>> {
        RawIter::new(snap, lo, hi).map(OrderedIter)
    }
}

/// The entries of a range of a map as a write transaction has it, in key order, or from
/// the end ([`WriteTxn::iter`](super::WriteTxn::iter), [`WriteTxn::prefix`](super::WriteTxn::prefix)). It borrows the transaction, which
/// writes nothing while it lives.
pub struct WriteIter<'t, 'm>(RawIter<&'t Write<'m>>);

impl<'t, 'm> WriteIter<'t, 'm> {
    /// `lo` and `hi` are tree keys.
    pub(super) fn new(
        w: &'t Write<'m>,
        lo: Option<Vec<u8>>,
        hi: Option<Vec<u8>>,
    ) -> Result<WriteIter<'t, 'm>> {
        RawIter::new(w, lo, hi).map(WriteIter)
    }
}

macro_rules! iter_impls {
    ($t:ty) => {
        impl Iterator for $t {
            type Item = Result<(Vec<u8>, Vec<u8>)>;

            fn next(&mut self) -> Option<Self::Item> {
                self.0.take(true)
            }

            fn size_hint(&self) -> (usize, Option<usize>) {
                self.0.size_hint()
            }
        }

        impl DoubleEndedIterator for $t {
            fn next_back(&mut self) -> Option<Self::Item> {
                self.0.take(false)
            }
        }
    };
}

iter_impls!(OrderedIter<'_>);
iter_impls!(WriteIter<'_, '_>);

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
