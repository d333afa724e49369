//! The store's catalog of maps: finding, creating, opening and dropping them by name.

use super::*;
use crate::api::fixed::{FixedMap, FixedOptions};
use crate::api::map::Map;
use crate::error::{Error, Result};
use crate::kinds::varmap::{self, MapRef};
use crate::kinds::AnyKind;
use crate::object::Kind;
use crate::shared::Shared;
use crate::txn::Txn;

impl Store {
    /// Opens the map `name`, creating it (with default options) if it does not exist.
    pub fn map(&self, name: &str) -> Result<Map> {
        self.map_with(name, &MapOptions::default(), true)
    }

    /// Opens an existing map; `NotFound` if there is none.
    pub fn open_map(&self, name: &str) -> Result<Map> {
        self.map_with(name, &MapOptions::default(), false)
    }

    /// Opens the map `name`, creating it with `opts` if it does not exist and `create`.
    /// The options of an existing map are those it was created with. A fixed-size map of
    /// that name is [`Error::WrongMapKind`].
    pub fn map_with(&self, name: &str, opts: &MapOptions, create: bool) -> Result<Map> {
        let _call = crate::deadline::call();
        validate_name(name)?;
        if !(1..=4096).contains(&opts.segment_buckets) || !(1..=1024).contains(&opts.stash_buckets)
        {
            return Err(Error::InvalidArgument(
                "segment_buckets must be 1..=4096 and stash_buckets 1..=1024".into(),
            ));
        }
        check_known(opts.key_type, opts.value_type)?;
        if let Some(m) = self.find_map(name, opts.uids)? {
            if opts.uids && !m.has_uids() {
                return Err(Error::InvalidArgument(format!(
                    "map {name:?} exists without UIDs; UIDs are chosen when a map is created"
                )));
            }
            check_types(&self.sh, m.m.hdr, name, opts.key_type, opts.value_type)?;
            return Ok(m);
        }
        if !create {
            return Err(Error::NotFound(format!("map {name:?}")));
        }
        let tx = self.txn()?;
        tx.lock(H_CATALOG_LOCK)?;
        let r = self.create_map_locked(&tx, name, opts);
        tx.unlock(H_CATALOG_LOCK);
        let m = r?;
        if opts.uids && !m.has_uids() {
            // Another process created it first, without UIDs.
            return Err(Error::InvalidArgument(format!(
                "map {name:?} exists without UIDs; UIDs are chosen when a map is created"
            )));
        }
        // Another process may have created it first, with other types.
        check_types(&self.sh, m.m.hdr, name, opts.key_type, opts.value_type)?;
        Ok(m)
    }

    /// The live variable-size map `name`; a fixed-size one is `WrongMapKind` (`uids`:
    /// what the caller asked for, for the error).
    pub(crate) fn find_map(&self, name: &str, uids: bool) -> Result<Option<Map>> {
        let sh = &*self.sh;
        sh.ensure_registered()?;
        for id in 0..sh.g.n_catalog {
            let ce = sh.g.cat_entry(id);
            let st = sh.w(ce + C_STATE).load(Acquire);
            if st & 0xff != CAT_LIVE || !name_is(sh, ce, name) {
                continue;
            }
            if sh.w(ce + C_KIND).load(Acquire) != KIND_MAP || crate::kinds::fixed::is_fixed(sh, id)
            {
                return Err(Error::WrongMapKind {
                    name: name.into(),
                    found: self.kind_at(id)?,
                    wanted: MapKind::Variable { uids },
                });
            }
            let mut m = varmap::map_ref_unchecked(sh, id)?;
            m.cat_word = st;
            if sh.w(ce + C_STATE).load(Acquire) != st {
                continue; // dropped while we looked
            }
            return Ok(Some(Map {
                sh: self.sh.clone(),
                m,
                name: name.into(),
            }));
        }
        Ok(None)
    }

    pub(crate) fn create_map_locked(&self, tx: &Txn, name: &str, opts: &MapOptions) -> Result<Map> {
        let sh = &*self.sh;
        self.finish_drops(tx)?;
        if let Some(m) = self.find_map(name, opts.uids)? {
            return Ok(m);
        }
        let (n_main, n_stash) = (opts.segment_buckets as u64, opts.stash_buckets as u64);
        let k = varmap::first_chunk_need(sh, n_main, n_stash).div_ceil(sh.g.chunk_size());
        let mref = self.create_object(tx, name, KIND_MAP, k, |c, id, word| {
            let flags = if opts.uids { MF_UIDS } else { 0 };
            let mut m: MapRef = varmap::init_map(sh, c, id, n_main, n_stash, flags);
            record_types(sh, m.hdr, opts.key_type, opts.value_type);
            m.cat_word = word;
            (m, m.hdr)
        })?;
        Ok(Map {
            sh: self.sh.clone(),
            m: mref,
            name: name.into(),
        })
    }

    /// Opens the fixed-size map `name` (every key `key_size` bytes, every value
    /// `value_size` bytes), creating it with default options if it does not exist. An
    /// existing map with other sizes is `InvalidArgument`, a variable-size map of that
    /// name [`Error::WrongMapKind`]. Keys are 1 to 512 bytes, values 0 to 128; see [`FixedMap`].
    pub fn fixed_map(&self, name: &str, key_size: usize, value_size: usize) -> Result<FixedMap> {
        self.fixed_map_with(name, key_size, value_size, &FixedOptions::default(), true)
    }

    /// [`Store::fixed_map`] with options, applied if the map is created; `create = false`
    /// makes a missing map `NotFound`.
    pub fn fixed_map_with(
        &self,
        name: &str,
        key_size: usize,
        value_size: usize,
        opts: &FixedOptions,
        create: bool,
    ) -> Result<FixedMap> {
        let _call = crate::deadline::call();
        validate_name(name)?;
        let (ks, vs) = (key_size as u64, value_size as u64);
        if !(1..=MAX_KEY_SIZE).contains(&ks) || vs > MAX_VALUE_SIZE {
            return Err(Error::InvalidArgument(format!(
                "fixed-size maps have keys of 1 to {} bytes and values of 0 to {} bytes",
                MAX_KEY_SIZE, MAX_VALUE_SIZE
            )));
        }
        if opts.segment_buckets > 4096 || opts.stash_buckets > 1024 {
            return Err(Error::InvalidArgument(
                "segment_buckets must be 0..=4096 and stash_buckets 0..=1024".into(),
            ));
        }
        check_known(opts.key_type, opts.value_type)?;
        check_fixed_types(ks, vs, opts)?;
        if let Some(m) = self.find_fixed(name, ks, vs)? {
            check_types(&self.sh, m.f.m.hdr, name, opts.key_type, opts.value_type)?;
            return Ok(m);
        }
        if !create {
            return Err(Error::NotFound(format!("map {name:?}")));
        }
        let tx = self.txn()?;
        tx.lock(H_CATALOG_LOCK)?;
        let r = self.create_fixed_locked(&tx, name, ks, vs, opts);
        tx.unlock(H_CATALOG_LOCK);
        let m = r?;
        // Another process may have created it first, with other types.
        check_types(&self.sh, m.f.m.hdr, name, opts.key_type, opts.value_type)?;
        Ok(m)
    }

    /// The live catalog entry named `name`, whatever its kind (names are one namespace):
    /// (id, state word).
    pub(crate) fn find_entry(&self, name: &str) -> Result<Option<(u64, u64)>> {
        let sh = &*self.sh;
        sh.ensure_registered()?;
        for id in 0..sh.g.n_catalog {
            let ce = sh.g.cat_entry(id);
            let st = sh.w(ce + C_STATE).load(Acquire);
            if st & 0xff == CAT_LIVE && name_is(sh, ce, name) {
                return Ok(Some((id, st)));
            }
        }
        Ok(None)
    }

    pub(crate) fn find_fixed(&self, name: &str, ks: u64, vs: u64) -> Result<Option<FixedMap>> {
        let sh = &*self.sh;
        let Some((id, st)) = self.find_entry(name)? else {
            return Ok(None);
        };
        if !crate::kinds::fixed::is_fixed(sh, id) {
            return Err(Error::WrongMapKind {
                name: name.into(),
                found: self.kind_at(id)?,
                wanted: MapKind::Fixed {
                    key_size: ks as usize,
                    value_size: vs as usize,
                },
            });
        }
        let mut f = crate::kinds::fixed::fixed_ref_unchecked(sh, id)?;
        f.m.cat_word = st;
        if sh.w(sh.g.cat_entry(id) + C_STATE).load(Acquire) != st {
            return Ok(None); // dropped while we looked
        }
        if (f.geo.key_size, f.geo.value_size) != (ks, vs) {
            return Err(Error::InvalidArgument(format!(
                "map {name:?} has {}-byte keys and {}-byte values, not {ks} and {vs}",
                f.geo.key_size, f.geo.value_size
            )));
        }
        Ok(Some(FixedMap {
            sh: self.sh.clone(),
            f,
            name: name.into(),
        }))
    }

    pub(crate) fn create_fixed_locked(
        &self,
        tx: &Txn,
        name: &str,
        ks: u64,
        vs: u64,
        opts: &FixedOptions,
    ) -> Result<FixedMap> {
        let sh = &*self.sh;
        self.finish_drops(tx)?;
        if let Some(m) = self.find_fixed(name, ks, vs)? {
            return Ok(m);
        }
        if self.find_entry(name)?.is_some() {
            return Err(Error::InvalidArgument(format!(
                "map {name:?} exists and is not a fixed-size map"
            )));
        }
        let geo = Geo::new(ks, vs, sh.g.fixed_groups, sh.g.fixed_tags);
        let (dm, ds) = geo.default_buckets();
        let n_main = if opts.segment_buckets == 0 {
            dm
        } else {
            opts.segment_buckets as u64
        };
        let n_stash = if opts.stash_buckets == 0 {
            ds
        } else {
            opts.stash_buckets as u64
        };
        let k = crate::kinds::fixed::first_chunk_need(sh, &geo, n_main, n_stash)
            .div_ceil(sh.g.chunk_size());
        let f = self.create_object(tx, name, KIND_MAP, k, |c, id, word| {
            let mut f = crate::kinds::fixed::init_map(sh, c, id, geo, n_main, n_stash);
            record_types(sh, f.m.hdr, opts.key_type, opts.value_type);
            f.m.cat_word = word;
            (f, f.m.hdr)
        })?;
        Ok(FixedMap {
            sh: self.sh.clone(),
            f,
            name: name.into(),
        })
    }
}

impl Store {
    /// Creates an object (catalog lock held): takes a free catalog entry and a run of `k`
    /// chunks, has `init(run, id, state word)` write the object into the run (it is ours:
    /// the alloc lock is held, and nobody sees it yet) and return it with its header
    /// offset, then publishes the run and the entry with one redo list.
    pub(crate) fn create_object<T>(
        &self,
        tx: &Txn,
        name: &str,
        kind: u64,
        k: u64,
        init: impl FnOnce(u64, u64, u64) -> (T, u64),
    ) -> Result<T> {
        let sh = &*self.sh;
        let id = (0..sh.g.n_catalog)
            .find(|id| sh.w(sh.g.cat_entry(*id) + C_STATE).load(Acquire) & 0xff == CAT_FREE)
            .ok_or_else(|| {
                Error::StoreFull(format!(
                    "the store already holds its maximum of {} objects (maps and queue sets)",
                    sh.g.n_catalog
                ))
            })?;
        let ce = sh.g.cat_entry(id);
        let inc = (sh.w(ce + C_STATE).load(Acquire) >> 8) + 1;
        let word = CAT_LIVE | (inc << 8);
        crate::alloc::with_alloc_lock(tx, |redo| {
            let c = crate::alloc::take_run(tx, k, redo, crate::alloc::Purpose::Normal)?;
            let (object, hdr) = init(c, id, word);
            sh.r.write_bytes(ce + C_NAME, name.as_bytes());
            redo.push(c + K_KIND, CK_INDEX);
            redo.push(c + K_RUN, k);
            redo.push(c + K_NEXT, 0);
            redo.push(c + K_OWNER, id);
            redo.push(ce + C_KIND, kind);
            redo.push(ce + C_HDR, hdr);
            redo.push(ce + C_NAME_LEN, name.len() as u64);
            redo.push(ce + C_STATE, word);
            Ok(object)
        })
    }

    /// Names of the maps (variable and fixed-size) in the store.
    pub fn maps(&self) -> Result<Vec<String>> {
        let sh = &*self.sh;
        sh.ensure_registered()?;
        let mut out = Vec::new();
        for id in 0..sh.g.n_catalog {
            let ce = sh.g.cat_entry(id);
            if sh.w(ce + C_STATE).load(Acquire) & 0xff == CAT_LIVE
                && sh.w(ce + C_KIND).load(Acquire) == KIND_MAP
            {
                out.push(read_name(sh, ce)?);
            }
        }
        Ok(out)
    }

    /// What kind of object `name` is (a map of either kind, or a queue set; None if there
    /// is none), so that a tool can open any object without knowing how it was created.
    pub fn map_kind(&self, name: &str) -> Result<Option<MapKind>> {
        let Some((id, _)) = self.find_entry(name)? else {
            return Ok(None);
        };
        self.kind_at(id).map(Some)
    }

    /// Figures about the object `name` (None if there is none), whatever its kind: what a
    /// tool lists for every object of a store.
    pub fn object_stats(&self, name: &str) -> Result<Option<crate::ObjectStats>> {
        let Some((id, _)) = self.find_entry(name)? else {
            return Ok(None);
        };
        let sh = &*self.sh;
        sh.ensure_registered()?;
        match AnyKind::open(sh, id)? {
            Some(object) => object.stats(sh).map(Some),
            // Dropped since it was found.
            None => Ok(None),
        }
    }

    /// The kind of the live map `id`.
    pub(crate) fn kind_at(&self, id: u64) -> Result<MapKind> {
        Ok(AnyKind::open_any(&self.sh, id)?.map_kind())
    }

    /// Drops the map or queue set `name` and everything in it; returns whether it existed.
    /// Handles on it (in any process) get `NotFound` from then on (an element of a
    /// dropped queue set still held can be read and written, but pushes nowhere).
    pub fn drop_map(&self, name: &str) -> Result<bool> {
        let _call = crate::deadline::call();
        validate_name(name)?;
        let Some((id, cat_word)) = self.find_entry(name)? else {
            return Ok(false);
        };
        let object = AnyKind::open(&self.sh, id)?;
        let tx = self.txn()?;
        tx.lock(H_CATALOG_LOCK)?;
        let r = (|| {
            let sh = &*self.sh;
            let ce = sh.g.cat_entry(id);
            if sh.w(ce + C_STATE).load(Acquire) != cat_word {
                return Ok(false);
            }
            if let Some(AnyKind::Queues(q)) = &object {
                q.close_for_drop(&tx)?;
            }
            // Its records become dead data (a fixed map has none). Counted before the map
            // is marked dropping: after, its statistics fail ("dropped"), and counting
            // them as 0 left the cleaner asleep while dropped maps' records filled the file.
            let live = object.map_or(0, |k| k.live_record_bytes(sh));
            let mut redo = crate::txn::Redo::new();
            redo.push(ce + C_STATE, CAT_DROPPING | (cat_word & !0xff));
            tx.commit(I_REDO, &[], &redo);
            tx.apply(&redo);
            tx.done();
            crate::alloc::note_dead(&tx, live);
            self.finish_drops(&tx)?;
            Ok(true)
        })();
        tx.unlock(H_CATALOG_LOCK);
        r
    }

    /// Completes every drop in progress (called with the catalog lock held): waits out
    /// writers in the dropped maps, then frees their chunks one run at a time.
    pub(crate) fn finish_drops(&self, tx: &Txn) -> Result<()> {
        let sh = &*self.sh;
        for id in 0..sh.g.n_catalog {
            let ce = sh.g.cat_entry(id);
            let st = sh.w(ce + C_STATE).load(Acquire);
            if st & 0xff != CAT_DROPPING {
                continue;
            }
            // Barrier: no writer is left inside the object (later ones see it dropping).
            let object = AnyKind::open_any(sh, id)?;
            object.drop_barrier(tx)?;
            let hdr = object.header();
            // On disk, the drop must be durable before the map's chunks can be reused.
            if sh.durable {
                sh.flush()?;
            }
            let first = sh.g.chunk_of(hdr);
            loop {
                let run = sh.w(hdr + M_CHAIN).load(Acquire);
                crate::alloc::check_chunk(sh, run, "map chain")?;
                let k = sh.w(run + K_RUN).load(Acquire).max(1);
                let next = sh.w(run + K_NEXT).load(Acquire);
                let last = run == first;
                crate::alloc::with_alloc_lock(tx, |redo| {
                    crate::alloc::free_run_redo(sh, run, k, redo);
                    if last {
                        redo.push(ce + C_STATE, CAT_FREE | (st & !0xff));
                    } else {
                        redo.push(hdr + M_CHAIN, next);
                    }
                    Ok(())
                })?;
                if last {
                    break;
                }
            }
        }
        Ok(())
    }
}

pub(crate) fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_NAME {
        return Err(Error::InvalidArgument(format!(
            "map names are 1 to {MAX_NAME} bytes"
        )));
    }
    Ok(())
}

pub(crate) fn name_is(sh: &Shared, ce: u64, name: &str) -> bool {
    sh.w(ce + C_NAME_LEN).load(Acquire) == name.len() as u64
        && sh.r.bytes_eq(ce + C_NAME, name.as_bytes())
}

pub(crate) fn read_name(sh: &Shared, ce: u64) -> Result<String> {
    let n = sh.w(ce + C_NAME_LEN).load(Acquire);
    if n == 0 || n > MAX_NAME as u64 {
        return Err(sh.corrupt(format!("catalog entry at {ce:#x}: name length {n}")));
    }
    let mut b = vec![0u8; n as usize];
    sh.r.read_bytes(ce + C_NAME, &mut b);
    String::from_utf8(b)
        .map_err(|_| sh.corrupt(format!("catalog entry at {ce:#x}: name is not UTF-8")))
}

/// The key and value types recorded in the map header at `hdr`.
pub(crate) fn recorded_types(sh: &Shared, hdr: u64) -> (Option<DataType>, Option<DataType>) {
    let w = |o| sh.w(hdr + o).load(Relaxed);
    types_of(w(M_TYPES), w(M_KEY_TAG), w(M_VALUE_TAG))
}

/// Refuses types asked for (`key`, `value`) that differ from those map `name` recorded. A
/// map that recorded none (created without, or by an older library) takes any, and any
/// map takes `Bytes`: its raw bytes are a view of every type.
fn check_types(
    sh: &Shared,
    hdr: u64,
    name: &str,
    key: Option<DataType>,
    value: Option<DataType>,
) -> Result<()> {
    let (rk, rv) = recorded_types(sh, hdr);
    for (what, asked, rec) in [("keys", key, rk), ("values", value, rv)] {
        if let (Some(a), Some(r)) = (asked, rec) {
            if a != r && a != DataType::Bytes {
                return Err(Error::InvalidArgument(format!(
                    "map {name:?} records its {what} as {r}, not {a}"
                )));
            }
        }
    }
    Ok(())
}

/// Records `key` and `value` in the map header at `hdr`, still private to its creator.
fn record_types(sh: &Shared, hdr: u64, key: Option<DataType>, value: Option<DataType>) {
    for (off, word) in type_words(key, value) {
        sh.w(hdr + off).store(word, Relaxed);
    }
}

/// Refuses to record a type this library does not know (`DataType::Unknown`).
fn check_known(key: Option<DataType>, value: Option<DataType>) -> Result<()> {
    match [key, value]
        .into_iter()
        .flatten()
        .find(|t| matches!(t, DataType::Unknown(_)))
    {
        Some(t) => Err(Error::InvalidArgument(format!(
            "the type {t} is read from maps, never recorded"
        ))),
        None => Ok(()),
    }
}

/// Refuses a number type for a fixed map's keys or values of another size than 8 bytes.
fn check_fixed_types(ks: u64, vs: u64, opts: &FixedOptions) -> Result<()> {
    for (what, size, t) in [("keys", ks, opts.key_type), ("values", vs, opts.value_type)] {
        if let Some(n) = t.and_then(|t| t.fixed_size()) {
            if size != n as u64 {
                return Err(Error::InvalidArgument(format!(
                    "{} {what} have {n} bytes, not {size}",
                    t.expect("a type")
                )));
            }
        }
    }
    Ok(())
}
