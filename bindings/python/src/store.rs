//! `shoal.Store` and the module-level functions that open and remove stores.

use crate::codec::Codec;
use crate::errors::{closed, ResultExt};
use crate::fixed::{FixedCore, FixedMapNative};
use crate::map::{Map, MapCore};
use arc_swap::ArcSwapOption;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

/// What a `Store` object and all its maps share. `close()` empties `store` and closes every
/// map's handles (handle.rs); operations in flight keep their own reference until they
/// finish, so the mapping goes away only after the last one.
pub struct StoreCore {
    pub path: PathBuf,
    pub lock_timeout: f64,
    pub store: ArcSwapOption<shoal::Store>,
    pub maps: Mutex<Vec<Weak<MapCore>>>,
    pub fixed_maps: Mutex<Vec<Weak<FixedCore>>>,
}

/// An open Shoal store: one file (by default in /dev/shm) holding named maps that every
/// process which opens it shares.
///
/// Created by `shoal.open()`. A context manager: `with shoal.open("demo") as store: ...`
/// closes it at the end of the block. Pickles to its path, so it can be passed to child
/// processes under any multiprocessing start method; a store opened before `fork()` also
/// keeps working in the child.
#[pyclass(module = "shoal", name = "Store", frozen, weakref)]
pub struct Store {
    pub core: Arc<StoreCore>,
}

impl Store {
    fn get(&self, py: Python<'_>) -> PyResult<Arc<shoal::Store>> {
        self.core.store.load_full().ok_or_else(|| closed(py))
    }
}

/// What `Store.map_kind` returns: (kind, key size, value size).
type KindTuple = (&'static str, Option<usize>, Option<usize>);

/// A condition or operation of `_txn_commit`: (map, key, kind, value, integer).
type TxnItem<'py> = (
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    String,
    Option<Bound<'py, PyAny>>,
    i64,
);

/// What `_txn_commit` returns per operation: (applied, old value).
type TxnResult = (bool, Option<Py<PyAny>>);

/// A map a transaction or snapshot names: the engine's handle and, for a variable-size
/// `shoal.Map`, its key and value codecs (a `shoal.FixedMap` takes and gives bytes).
struct Target {
    map: shoal::TxnMap,
    codecs: Option<(Codec, Codec)>,
}

impl Target {
    fn of(py: Python<'_>, m: &Bound<'_, PyAny>) -> PyResult<Target> {
        use shoal::TxnTarget;
        if let Ok(vm) = m.cast::<Map>() {
            let vm = vm.get();
            let g = vm.core.enter().ok_or_else(|| closed(py))?;
            return Ok(Target {
                map: g.map.txn_map(),
                codecs: Some((vm.kc, vm.vc)),
            });
        }
        let n = native(m)?;
        let g = n.get().core.enter().ok_or_else(|| closed(py))?;
        Ok(Target {
            map: g.map.txn_map(),
            codecs: None,
        })
    }
    fn key(&self, k: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        match self.codecs {
            Some((kc, _)) => Ok(kc.encode(k, "key")?.into_vec()),
            None => k.extract(),
        }
    }
    fn value(&self, v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
        match self.codecs {
            Some((_, vc)) => Ok(vc.encode(v, "value")?.into_vec()),
            None => v.extract(),
        }
    }
    fn decode(&self, py: Python<'_>, v: &[u8]) -> PyResult<Py<PyAny>> {
        match self.codecs {
            Some((_, vc)) => Ok(vc.decode(py, v)?.unbind()),
            None => Ok(PyBytes::new(py, v).into_any().unbind()),
        }
    }
}

/// The native map behind a `shoal.FixedMap`.
fn native<'py>(m: &Bound<'py, PyAny>) -> PyResult<Bound<'py, FixedMapNative>> {
    Ok(m.getattr("_m")?.cast_into::<FixedMapNative>()?)
}

/// What `snapshot` returns: the maps' targets and the raw values (None: absent).
type Snapshot = (Vec<Target>, Vec<Option<Vec<u8>>>);

/// What `_txn_read` returns: the stored bytes and the decoded value (None: absent).
type TxnRead = (Option<Py<PyBytes>>, Option<Py<PyAny>>);

/// Reads (map, key) pairs as of one instant: the maps' targets and the raw values.
fn snapshot(
    py: Python<'_>,
    st: &shoal::Store,
    items: &[(Bound<'_, PyAny>, Bound<'_, PyAny>)],
) -> PyResult<Snapshot> {
    let mut targets = Vec::with_capacity(items.len());
    let mut keys = Vec::with_capacity(items.len());
    for (m, k) in items {
        let t = Target::of(py, m)?;
        keys.push(t.key(k)?);
        targets.push(t);
    }
    let req: Vec<(&shoal::TxnMap, &[u8])> = targets
        .iter()
        .map(|t| &t.map)
        .zip(keys.iter().map(|k| &k[..]))
        .collect();
    let vals = py.detach(|| st.snapshot_get(&req)).py_err(py)?;
    Ok((targets, vals))
}

fn stats_dict<'py>(py: Python<'py>, pairs: &[(&str, u64)]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in pairs {
        d.set_item(*k, *v)?;
    }
    Ok(d)
}

#[pymethods]
impl Store {
    /// The store file's path (a bare name was resolved to /dev/shm/NAME.shoal).
    #[getter]
    fn path(&self) -> String {
        self.core.path.display().to_string()
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.core.store.load().is_none()
    }

    /// Seconds an operation waits for a lock held by a live process before raising
    /// `shoal.Timeout` (locks of dead processes are recovered within milliseconds).
    #[getter]
    fn lock_timeout(&self) -> f64 {
        self.core.lock_timeout
    }

    /// map(name, *, key=None, value=None, create=True, uids=False) -> Map
    ///
    /// Opens the named map, creating it if it does not exist (unless `create=False`, which
    /// raises `shoal.NotFound`). `key` and `value` name the codecs that turn Python objects
    /// into the stored bytes: "bytes", "str" (UTF-8), "int" (8-byte little-endian signed),
    /// "uint" (8-byte little-endian unsigned), "float" (8-byte IEEE 754 little-endian),
    /// "json" (canonical compact JSON) or "pickle" (opt-in; never use it on a store that
    /// untrusted processes can write: unpickling runs arbitrary code). A map created with
    /// codecs records them in the file, and every language then decodes it alike: opened
    /// with none, a map takes the codecs it recorded ("bytes" if none, and never "pickle"
    /// unless asked for); opened with others, it raises `shoal.InvalidArgument`.
    ///
    /// `uids=True` creates the map with a stable UID per key (`Map.uid`, `Map.put_uid`
    /// and the `*_by_uid` methods). UIDs are chosen when a map is created: asking for them
    /// on an existing map without UIDs raises `shoal.InvalidArgument`; `uids=False` opens
    /// an existing map with UIDs all the same.
    #[pyo3(signature = (name, *, key = None, value = None, create = true, uids = false))]
    fn map(
        slf: &Bound<'_, Self>,
        name: &str,
        key: Option<&str>,
        value: Option<&str>,
        create: bool,
        uids: bool,
    ) -> PyResult<Map> {
        let py = slf.py();
        let kc = key.map(Codec::parse).transpose()?;
        let vc = value.map(Codec::parse).transpose()?;
        let this = slf.get();
        let st = this.get(py)?;
        let name_owned = name.to_owned();
        // The codecs asked for are recorded in a map created now, and must match those an
        // existing map recorded (the engine refuses others).
        let o = shoal::MapOptions {
            uids,
            key_type: kc.map(Codec::data_type),
            value_type: vc.map(Codec::data_type),
            ..Default::default()
        };
        let m = py
            .detach(|| st.map_with(&name_owned, &o, create))
            .py_err(py)?;
        let kc = match kc {
            Some(c) => c,
            None => Codec::for_type(m.key_type(), name, "key")?,
        };
        let vc = match vc {
            Some(c) => c,
            None => Codec::for_type(m.value_type(), name, "value")?,
        };
        let core = Arc::new(MapCore::new(m));
        {
            let mut maps = this.core.maps.lock().unwrap_or_else(|e| e.into_inner());
            maps.retain(|w| w.strong_count() > 0);
            maps.push(Arc::downgrade(&core));
        }
        // close() may have run meanwhile: then this map must be closed too.
        if this.core.store.load().is_none() {
            core.close();
            return Err(closed(py));
        }
        Ok(Map {
            core,
            store: slf.clone().unbind(),
            name: name.to_owned(),
            kc,
            vc,
        })
    }

    /// queues(name, element_size=None, elements=None, *, queues=(), limits=None,
    /// initial="free", redeliver=False) -> QueueSet
    ///
    /// Opens the queue set `name`, creating it when `element_size` and `elements` are
    /// given and there is none: `elements` elements of `element_size` bytes, the queues
    /// `queues` (besides `free`) with the depth limits `limits` gives ({name: limit}),
    /// every element starting in `initial`, and with `redeliver` a dead holder's elements
    /// going back to the queue each came from (else to `initial`). Without sizes it opens
    /// an existing set (shoal.NotFound if there is none).
    #[pyo3(signature = (name, element_size = None, elements = None, *, queues = Vec::new(),
                        limits = None, initial = "free", redeliver = false))]
    #[allow(clippy::too_many_arguments)]
    fn queues(
        slf: &Bound<'_, Self>,
        name: &str,
        element_size: Option<usize>,
        elements: Option<u64>,
        queues: Vec<String>,
        limits: Option<Bound<'_, PyDict>>,
        initial: &str,
        redeliver: bool,
    ) -> PyResult<crate::queue::QueueSet> {
        let py = slf.py();
        let st = slf.get().get(py)?;
        crate::queue::open(
            py,
            &st,
            name,
            element_size,
            elements,
            queues,
            limits,
            initial,
            redeliver,
        )
    }

    /// log(name, slots=None, max_record=None, *, policy="overwrite", readers=8) -> Log
    ///
    /// Opens the shared log `name`, creating it when `slots` and `max_record` are given
    /// and there is none: a ring of `slots` records (2 to 2^32) of up to `max_record` bytes
    /// each (the message, and per field its key, its value and 8 bytes; 1 to 1 MiB), that
    /// when full overwrites its oldest records ("overwrite": readers count what they
    /// missed), makes an append wait for room ("wait") or drops the new record ("drop"),
    /// with room for `readers` named readers (1 to 256). An existing log is opened as it
    /// is. Without sizes it opens an existing log (`shoal.NotFound` if there is none). A
    /// log stays usable after `close()` of the store it came from.
    #[pyo3(signature = (name, slots = None, max_record = None, *, policy = "overwrite",
                        readers = 8))]
    fn log(
        &self,
        py: Python<'_>,
        name: &str,
        slots: Option<u64>,
        max_record: Option<usize>,
        policy: &str,
        readers: usize,
    ) -> PyResult<crate::log::Log> {
        let st = self.get(py)?;
        crate::log::open(
            py,
            &st,
            self.core.lock_timeout,
            name,
            slots,
            max_record,
            policy,
            readers,
        )
    }

    /// Names of the logs in the store.
    fn logs(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let st = self.get(py)?;
        st.logs().py_err(py)
    }

    /// fixed_map(name, key_size, value_size, create=True, *, key_type=None,
    /// value_type=None) -> FixedMap
    ///
    /// Opens the named fixed-size map (bytes keys of exactly `key_size` bytes, bytes values
    /// of exactly `value_size` bytes, stored as cells in the index itself), creating it if
    /// it does not exist (unless `create=False`, which raises `shoal.NotFound`). Sizes out
    /// of range, other sizes than an existing map's, or a variable-size map of that name
    /// raise `shoal.InvalidArgument` (a `ValueError`). `key_type` and `value_type` name the
    /// types a new map records for other languages ("bytes", "utf8", "i64", "u64", "f64",
    /// "json", "user:0xTAG"; the numbers need 8 bytes); an existing map that recorded
    /// others raises `shoal.InvalidArgument`. Keys and values stay bytes here.
    #[pyo3(signature = (name, key_size, value_size, create = true, *, key_type = None,
                        value_type = None))]
    #[allow(clippy::too_many_arguments)]
    fn fixed_map<'py>(
        slf: &Bound<'py, Self>,
        name: &str,
        key_size: usize,
        value_size: usize,
        create: bool,
        key_type: Option<&str>,
        value_type: Option<&str>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let opts = shoal::FixedOptions {
            key_type: key_type.map(crate::codec::data_type_named).transpose()?,
            value_type: value_type.map(crate::codec::data_type_named).transpose()?,
            ..Default::default()
        };
        let this = slf.get();
        let st = this.get(py)?;
        let name_owned = name.to_owned();
        let m = py
            .detach(|| st.fixed_map_with(&name_owned, key_size, value_size, &opts, create))
            .py_err(py)?;
        let core = Arc::new(FixedCore::new(m));
        {
            let mut maps = this
                .core
                .fixed_maps
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            maps.retain(|w| w.strong_count() > 0);
            maps.push(Arc::downgrade(&core));
        }
        if this.core.store.load().is_none() {
            core.close();
            return Err(closed(py));
        }
        let native = FixedMapNative {
            core,
            name: name.to_owned(),
            key_size,
            value_size,
        };
        py.import("shoal._fixed")?
            .getattr("FixedMap")?
            .call1((native, slf))
    }

    /// _txn_commit(conds, then_ops, else_ops) -> (succeeded, [(applied, old), ...])
    ///
    /// The native half of `shoal.Transaction.commit`: each condition and operation is a
    /// tuple (`shoal.FixedMap` or `shoal.Map`, key, kind, value or None, integer); a
    /// `Map`'s keys, values and old values go through its codecs. Conditions: "present",
    /// "absent", "equals" (value), "equals_raw" (value already encoded: bytes),
    /// "version" (integer), "==", "!=", "<", "<=", ">", ">=" (integer). Operations: "get",
    /// "put", "put_if_absent", "put_if_present" (value), "remove", "add" (integer). Runs
    /// with the GIL released.
    fn _txn_commit<'py>(
        &self,
        py: Python<'py>,
        conds: Vec<TxnItem<'py>>,
        then_ops: Vec<TxnItem<'py>>,
        else_ops: Vec<TxnItem<'py>>,
    ) -> PyResult<(bool, Vec<TxnResult>)> {
        let st = self.get(py)?;
        let mut t = st.transaction();
        let bad = |what: String| crate::errors::invalid(&what);
        for (m, key, kind, value, n) in &conds {
            let target = Target::of(py, m)?;
            let map = &target.map;
            let key = &target.key(key)?;
            let cmp = |c| shoal::Cond::int(map, key, c, *n);
            t = t.when(match (kind.as_str(), value) {
                ("present", _) => shoal::Cond::present(map, key),
                ("absent", _) => shoal::Cond::absent(map, key),
                ("equals", Some(v)) => shoal::Cond::equals(map, key, &target.value(v)?),
                ("equals_raw", Some(v)) => shoal::Cond::equals(map, key, &v.extract::<Vec<u8>>()?),
                ("version", _) => shoal::Cond::version(map, key, *n as u64),
                ("==", _) => cmp(shoal::IntCmp::Eq),
                ("!=", _) => cmp(shoal::IntCmp::Ne),
                ("<", _) => cmp(shoal::IntCmp::Lt),
                ("<=", _) => cmp(shoal::IntCmp::Le),
                (">", _) => cmp(shoal::IntCmp::Gt),
                (">=", _) => cmp(shoal::IntCmp::Ge),
                (k, _) => return Err(bad(format!("unknown condition {k:?}"))),
            });
        }
        let mut then_targets = Vec::with_capacity(then_ops.len());
        let mut else_targets = Vec::with_capacity(else_ops.len());
        for (list, is_then) in [(&then_ops, true), (&else_ops, false)] {
            for (m, key, kind, value, n) in list {
                let target = Target::of(py, m)?;
                let map = &target.map;
                let key = &target.key(key)?;
                let val = |v: &Bound<'py, PyAny>| target.value(v);
                let op = match (kind.as_str(), value) {
                    ("get", _) => shoal::TxnOp::get(map, key),
                    ("put", Some(v)) => shoal::TxnOp::put(map, key, &val(v)?),
                    ("put_if_absent", Some(v)) => shoal::TxnOp::put_if_absent(map, key, &val(v)?),
                    ("put_if_present", Some(v)) => shoal::TxnOp::put_if_present(map, key, &val(v)?),
                    ("remove", _) => shoal::TxnOp::remove(map, key),
                    ("add", _) => shoal::TxnOp::add(map, key, *n),
                    (k, _) => return Err(bad(format!("unknown operation {k:?}"))),
                };
                t = if is_then { t.then(op) } else { t.otherwise(op) };
                if is_then {
                    &mut then_targets
                } else {
                    &mut else_targets
                }
                .push(target);
            }
        }
        let out = py.detach(|| t.commit()).py_err(py)?;
        let targets = if out.succeeded {
            &then_targets
        } else {
            &else_targets
        };
        let results = out
            .results
            .into_iter()
            .zip(targets)
            .map(|(r, tg)| Ok((r.applied, r.value.map(|v| tg.decode(py, &v)).transpose()?)))
            .collect::<PyResult<_>>()?;
        Ok((out.succeeded, results))
    }

    /// snapshot_get(items) -> list
    ///
    /// Reads every (map, key) of `items` as of one instant (a `shoal.FixedMap` or a
    /// `shoal.Map`, whose keys and values go through its codecs): the values (None for an
    /// absent key) were all current at the same moment. Takes no lock and writes nothing,
    /// so writers never wait for it; retries while writers change the keys, up to the
    /// lock timeout (`shoal.Timeout`). Runs with the GIL released.
    fn snapshot_get<'py>(
        &self,
        py: Python<'py>,
        items: Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>,
    ) -> PyResult<Vec<Option<Py<PyAny>>>> {
        let st = self.get(py)?;
        let (targets, vals) = snapshot(py, &st, &items)?;
        vals.into_iter()
            .zip(&targets)
            .map(|(v, tg)| v.map(|v| tg.decode(py, &v)).transpose())
            .collect()
    }

    /// _txn_read(map, key) -> (raw bytes or None, value or None)
    ///
    /// `shoal.Watch.get`'s read: the stored bytes (which its commit condition compares,
    /// since a codec's encoding of a decoded value need not give the same bytes back)
    /// and the decoded value.
    fn _txn_read<'py>(
        &self,
        py: Python<'py>,
        map: Bound<'py, PyAny>,
        key: Bound<'py, PyAny>,
    ) -> PyResult<TxnRead> {
        let st = self.get(py)?;
        let (targets, mut vals) = snapshot(py, &st, &[(map, key)])?;
        match vals.pop().flatten() {
            None => Ok((None, None)),
            Some(v) => Ok((
                Some(PyBytes::new(py, &v).unbind()),
                Some(targets[0].decode(py, &v)?),
            )),
        }
    }

    /// transaction() -> Transaction
    ///
    /// A new multi-key transaction on this store's hash maps, `shoal.FixedMap` and
    /// `shoal.Map` mixed (`shoal.Transaction`):
    /// conditions, then-operations and else-operations committed as one atomic step, by
    /// `commit()` or at the end of a `with` block.
    fn transaction<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("shoal._txn")?
            .getattr("Transaction")?
            .call1((slf,))
    }

    /// ordered_map(name, *, key=None, value="bytes", u64_keys=False, duplicates=False,
    /// create=True) -> OrderedMap
    ///
    /// Opens the ordered map `name`, creating it if it does not exist (unless
    /// `create=False`, which raises `shoal.NotFound`). Keys are sorted bytewise, or as
    /// unsigned 64-bit integers with `u64_keys=True`; `duplicates=True` makes a multimap
    /// (several sorted values per key). An existing map must be opened with the options
    /// it was created with (`shoal.InvalidArgument` otherwise). `key` is "bytes" or "str"
    /// (codecs whose bytes sort as their values do), "uint" with `u64_keys` (the
    /// defaults: "bytes", and "uint" with `u64_keys`); `value` any codec. Ordered maps
    /// record no codecs: open a map with the codecs it was written with.
    #[pyo3(signature = (name, *, key = None, value = "bytes", u64_keys = false, duplicates = false, create = true))]
    #[allow(clippy::too_many_arguments)]
    fn ordered_map<'py>(
        slf: &Bound<'py, Self>,
        name: &str,
        key: Option<&str>,
        value: &str,
        u64_keys: bool,
        duplicates: bool,
        create: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let this = slf.get();
        let st = this.get(py)?;
        let opts = shoal::OrderedOptions {
            u64_keys,
            duplicates,
        };
        let native = crate::ordered::OrderedNative::open(
            py, &this.core, &st, name, key, value, opts, create,
        )?;
        py.import("shoal._ordered")?
            .getattr("OrderedMap")?
            .call1((native, slf))
    }

    /// ordered_marker(i) -> int
    ///
    /// The store's marker `i` (0 to 13): a persistent number that a transaction over
    /// ordered maps sets at its commit (`t.set_marker(i, v)`), 0 until one does.
    fn ordered_marker(&self, py: Python<'_>, i: u64) -> PyResult<u64> {
        let st = self.get(py)?;
        st.ordered_marker(i).py_err(py)
    }

    /// Names of the ordered maps in the store (`maps()` lists the hash maps).
    fn ordered_maps(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let st = self.get(py)?;
        st.ordered_maps().py_err(py)
    }

    /// _ordered_txn(maps) -> native transaction over the native maps `maps`.
    fn _ordered_txn(
        &self,
        py: Python<'_>,
        maps: Vec<PyRef<'_, crate::ordered::OrderedNative>>,
    ) -> PyResult<crate::ordered::OrderedTxnNative> {
        self.get(py)?;
        crate::ordered::OrderedTxnNative::begin(py, maps)
    }

    /// _ordered_snapshots(maps) -> native snapshots of the native maps `maps`, as of one
    /// commit.
    fn _ordered_snapshots(
        &self,
        py: Python<'_>,
        maps: Vec<PyRef<'_, crate::ordered::OrderedNative>>,
    ) -> PyResult<Vec<crate::ordered::OrderedSnapshotNative>> {
        self.get(py)?;
        crate::ordered::snapshot_many(py, maps)
    }

    /// ordered_write(maps) -> OrderedTransaction
    ///
    /// A write transaction over several ordered maps of this store (`with
    /// store.ordered_write([a, b]) as t: t.put(a, k, v) ...`): committed at the end of the
    /// block all at once, aborted if the block raises.
    fn ordered_write<'py>(
        slf: &Bound<'py, Self>,
        maps: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("shoal._ordered")?
            .getattr("_write")?
            .call1((slf, maps))
    }

    /// ordered_snapshot(maps) -> list[OrderedSnapshot]
    ///
    /// Snapshots of several ordered maps of this store, all as of one commit: a
    /// transaction over several of them is in every snapshot or in none.
    fn ordered_snapshot<'py>(
        slf: &Bound<'py, Self>,
        maps: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("shoal._ordered")?
            .getattr("_snapshots")?
            .call1((slf, maps))
    }

    /// watch(func, /) -> object
    ///
    /// The optimistic transaction: calls `func(t)` with a `shoal.Watch` `t`, whose reads
    /// (`t.get`, `t.get_int`) are recorded and whose writes (`t.put`, `t.add`, ...) are
    /// buffered, with no lock held; then commits the writes only if every key read still
    /// holds what was read, as one atomic step. Otherwise runs `func` again, until the
    /// lock timeout (`shoal.Timeout`). Returns what the committed run of `func` returned.
    fn watch<'py>(slf: &Bound<'py, Self>, func: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("shoal._txn")?
            .getattr("watch")?
            .call1((slf, func))
    }

    /// map_kind(name) -> tuple | None
    ///
    /// What kind of map `name` is: ("variable", None, None), ("uids", None, None) for a
    /// variable-size map with UIDs, ("fixed", key_size, value_size), ("ordered", None,
    /// None), or None if the store has no such map.
    fn map_kind<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Option<KindTuple>> {
        let st = self.get(py)?;
        let Some(k) = st.map_kind(name).py_err(py)? else {
            return Ok(None);
        };
        Ok(Some(match k {
            shoal::MapKind::Variable { uids: false } => ("variable", None, None),
            shoal::MapKind::Variable { uids: true } => ("uids", None, None),
            shoal::MapKind::Fixed {
                key_size,
                value_size,
            } => ("fixed", Some(key_size), Some(value_size)),
            shoal::MapKind::Ordered { .. } => ("ordered", None, None),
            k => {
                return Err(crate::errors::exc(
                    py,
                    "Error",
                    format!("map {name:?} is a {k}, which this binding has no kind name for"),
                ))
            }
        }))
    }

    /// Names of the maps in the store.
    fn maps(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let st = self.get(py)?;
        st.maps().py_err(py)
    }

    /// Drops the named map and everything in it, in every process; returns whether it
    /// existed. Handles on it raise `shoal.NotFound` from then on.
    fn drop_map(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        let st = self.get(py)?;
        let name = name.to_owned();
        py.detach(|| st.drop_map(&name)).py_err(py)
    }

    /// Verifies every invariant of the store file (run it while no write is in flight) and
    /// returns a `CheckReport`; `report.ok` is True for a sound store. Raises only if the
    /// check itself cannot run.
    fn check(&self, py: Python<'_>) -> PyResult<CheckReport> {
        let st = self.get(py)?;
        let r = py.detach(|| st.check()).py_err(py)?;
        Ok(CheckReport {
            ok: r.is_ok(),
            text: r.to_string(),
            problems: r.problems,
            maps: r.maps,
            entries: r.entries,
            segments: r.segments,
            chunks: r.chunks,
        })
    }

    /// Writes everything in the store through to stable storage (msync + fsync): after it
    /// returns, an OS crash loses nothing written before the call. Needed only for stores
    /// on disk (a store in /dev/shm does not survive a reboot anyway); see also
    /// `open(..., sync_writes=True)`.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let st = self.get(py)?;
        py.detach(|| st.flush()).py_err(py)
    }

    /// A batch of writes to this store, as a context manager: `with store.batch(): ...`.
    /// With `open(..., sync_writes=True)`, the writes this thread makes to the store inside
    /// the block are flushed once, when it ends (also when it raises), instead of one
    /// flush each. Each write stays atomic on its own; the block is not. Blocks nest (the
    /// outermost flushes). Without `sync_writes` it changes nothing.
    fn batch(&self, py: Python<'_>) -> PyResult<Batch> {
        self.get(py)?;
        Ok(Batch {
            core: self.core.clone(),
            open: None,
        })
    }

    /// backup(file) -> int
    ///
    /// Writes a copy of the whole store (every map of every kind) as of one instant into
    /// the new file `file`, while readers and writers in every process keep going (a hot
    /// backup), and returns the bytes the copy spans. The copy passes `check()`;
    /// restoring it is a file copy, and its first opener recovers it as after a crash at
    /// that instant: every transaction committed by then, none after. Writers are held
    /// up briefly (each saves a 64 KiB block before its first write to it). Raises
    /// `shoal.AlreadyExists` if `file` exists (it appears whole or not at all),
    /// `shoal.Timeout` if another backup of the store held it past the lock timeout or
    /// ordered-map write transactions stayed open through the backup's waits (three of
    /// 2 s), `shoal.InvalidArgument` for a store made by an older version (use
    /// `shoal.backup_idle` once it is closed everywhere) or when this thread has an
    /// ordered write transaction of the store open, and `shoal.ReadOnly` on a store
    /// opened read-only.
    fn backup(&self, py: Python<'_>, file: PathBuf) -> PyResult<u64> {
        let st = self.get(py)?;
        py.detach(|| st.backup(&file)).py_err(py)
    }

    /// Reclaims dead record space now (writers normally do it a little at a time), then
    /// returns the pages of free chunks to the filesystem (the memory of a store in
    /// /dev/shm; the file's size stays); returns the number of chunks freed.
    fn compact(&self, py: Python<'_>) -> PyResult<u64> {
        let st = self.get(py)?;
        py.detach(|| st.compact()).py_err(py)
    }

    /// Figures about the whole store, as a dict: file_size, max_size, data_bytes,
    /// live_bytes, dead_bytes, free_bytes, chunks_cleaned, maps, processes.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let st = self.get(py)?;
        let s = st.stats().py_err(py)?;
        stats_dict(
            py,
            &[
                ("file_size", s.file_size),
                ("max_size", s.max_size),
                ("data_bytes", s.data_bytes),
                ("live_bytes", s.live_bytes),
                ("dead_bytes", s.dead_bytes),
                ("free_bytes", s.free_bytes),
                ("chunks_cleaned", s.chunks_cleaned),
                ("maps", s.maps),
                ("processes", s.processes),
            ],
        )
    }

    /// Closes this handle and every Map opened from it; using them afterwards raises
    /// `shoal.Closed`. The file stays (see `shoal.remove()`), and so do other handles on
    /// it. Calls in flight in other threads finish first. Closing twice is a no-op.
    fn close(&self, py: Python<'_>) {
        let core = self.core.clone();
        py.detach(move || {
            core.store.store(None);
            let maps = std::mem::take(&mut *core.maps.lock().unwrap_or_else(|e| e.into_inner()));
            for m in maps.iter().filter_map(Weak::upgrade) {
                m.close();
            }
            let fixed =
                std::mem::take(&mut *core.fixed_maps.lock().unwrap_or_else(|e| e.into_inner()));
            for m in fixed.iter().filter_map(Weak::upgrade) {
                m.close();
            }
        });
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    /// Pickles to (path, lock_timeout): unpickling opens the existing store again, so a
    /// Store can be sent to spawn/forkserver children and through multiprocessing queues.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        if self.core.store.load().is_none() {
            return Err(PyValueError::new_err("cannot pickle a closed shoal.Store"));
        }
        let f = py.import("shoal")?.getattr("_reopen_store")?;
        PyTuple::new(
            py,
            [
                f,
                PyTuple::new(
                    py,
                    [
                        self.path().into_pyobject(py)?.into_any(),
                        self.core.lock_timeout.into_pyobject(py)?.into_any(),
                    ],
                )?
                .into_any(),
            ],
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "<shoal.Store {:?}{}>",
            self.core.path.display().to_string(),
            if self.closed() { " (closed)" } else { "" }
        )
    }
}

/// What `Store.check()` found.
#[pyclass(module = "shoal", name = "CheckReport", frozen)]
pub struct CheckReport {
    /// True when no problem was found.
    #[pyo3(get)]
    ok: bool,
    /// Every violation found, each saying what and where (empty for a sound store).
    #[pyo3(get)]
    problems: Vec<String>,
    /// Maps checked.
    #[pyo3(get)]
    maps: u64,
    /// Entries checked, over all maps.
    #[pyo3(get)]
    entries: u64,
    /// Index segments checked.
    #[pyo3(get)]
    segments: u64,
    /// Chunks walked.
    #[pyo3(get)]
    chunks: u64,
    text: String,
}

#[pymethods]
impl CheckReport {
    fn __str__(&self) -> String {
        self.text.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "<shoal.CheckReport ok={} maps={} entries={} segments={} chunks={} problems={}>",
            if self.ok { "True" } else { "False" },
            self.maps,
            self.entries,
            self.segments,
            self.chunks,
            self.problems.len()
        )
    }
}

fn secs(what: &str, v: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(v).map_err(|_| {
        PyValueError::new_err(format!("{what} must be a non-negative number of seconds"))
    })
}

/// open(path, *, create=True, exclusive=False, max_size=None, initial_size=None,
///      lock_timeout=None, max_processes=None, max_threads=None, max_maps=None,
///      chunk_size=None, mode=None, checksums=None, sync_writes=False,
///      pretouch=True, read_only=False) -> Store
///
/// Opens the store at `path` (str or os.PathLike; a bare name without '/' means
/// /dev/shm/NAME.shoal). With `create=True` (the default) a missing store is created;
/// with `create=False` a missing one raises `shoal.NotFound`; with `exclusive=True` the
/// store must not exist yet (`shoal.AlreadyExists`). The size and table options apply
/// only when the store is created and are then fixed in its header: `max_size` (bytes,
/// default 1 TiB of address space, not memory), `initial_size` (bytes allocated at
/// creation), `max_processes`, `max_threads`, `max_maps` (each default 1024),
/// `chunk_size` (power of two, 64 KiB to 64 MiB, default 256 KiB), `mode` (permission
/// bits, default 0o600), `checksums` (end every record with a CRC32C so that a value torn
/// by an OS crash is detected; default None: on for files on disk, off on tmpfs).
/// `lock_timeout` (seconds, default 5) applies to this process; `sync_writes=True`
/// flushes to stable storage after every write call (slow; only meaningful on disk).
/// `pretouch` (default True; tmpfs only) lets a background thread of this process fault in
/// the pages of space the store takes before the writers reach them, so that a put does
/// not take the page faults; pass False to keep the process free of that thread (Python
/// 3.12+ warns when a multi-threaded process calls `os.fork()`).
/// `read_only=True` opens an existing store for reading only, which needs no write
/// access to the file: reads, iteration, `stats()` and `check()` work, and anything that
/// writes raises `shoal.ReadOnly` (so does a read of a bucket a writer that died left
/// half written, at its timeout: only a process with write access can recover it).
/// Opening the same file twice in one process shares one mapping (and the first open's
/// `pretouch`); a read-only open has a mapping of its own.
#[pyfunction]
#[pyo3(signature = (path, *, create = true, exclusive = false, max_size = None,
    initial_size = None, lock_timeout = None, max_processes = None, max_threads = None,
    max_maps = None, chunk_size = None, mode = None, checksums = None, sync_writes = false,
    pretouch = true, read_only = false))]
#[allow(clippy::too_many_arguments)]
pub fn open(
    py: Python<'_>,
    path: PathBuf,
    create: bool,
    exclusive: bool,
    max_size: Option<u64>,
    initial_size: Option<u64>,
    lock_timeout: Option<f64>,
    max_processes: Option<u32>,
    max_threads: Option<u32>,
    max_maps: Option<u32>,
    chunk_size: Option<u64>,
    mode: Option<u32>,
    checksums: Option<bool>,
    sync_writes: bool,
    pretouch: bool,
    read_only: bool,
) -> PyResult<Store> {
    let mut o = shoal::Options {
        checksums,
        sync_writes,
        pretouch,
        ..Default::default()
    };
    if let Some(v) = max_size {
        o.max_size = v;
    }
    if let Some(v) = initial_size {
        o.initial_size = v;
    }
    if let Some(v) = lock_timeout {
        o.lock_timeout = secs("lock_timeout", v)?;
    }
    if let Some(v) = max_processes {
        o.max_processes = v;
    }
    if let Some(v) = max_threads {
        o.max_threads = v;
    }
    if let Some(v) = max_maps {
        o.max_maps = v;
    }
    if let Some(v) = chunk_size {
        o.chunk_size = v;
    }
    if let Some(v) = mode {
        o.mode = v;
    }
    let open_mode = match (read_only, exclusive, create) {
        (true, true, _) => {
            return Err(crate::errors::exc(
                py,
                "InvalidArgument",
                "read_only=True opens an existing store: it cannot be exclusive=True",
            ))
        }
        (true, false, _) => shoal::OpenMode::ReadOnly,
        (false, true, _) => shoal::OpenMode::CreateNew,
        (false, false, true) => shoal::OpenMode::OpenOrCreate,
        (false, false, false) => shoal::OpenMode::Open,
    };
    let resolved = shoal::resolve_path(&path);
    let st = py
        .detach(|| shoal::Store::open_with(&resolved, &o, open_mode))
        .py_err(py)?;
    Ok(Store::wrap(st, o.lock_timeout.as_secs_f64()))
}

impl Store {
    fn wrap(st: shoal::Store, lock_timeout: f64) -> Store {
        Store {
            core: Arc::new(StoreCore {
                path: st.path().to_owned(),
                lock_timeout,
                store: ArcSwapOption::from_pointee(st),
                maps: Mutex::new(Vec::new()),
                fixed_maps: Mutex::new(Vec::new()),
            }),
        }
    }
}

/// repair(path) -> tuple[Store, dict]
///
/// Opens a store that was not closed cleanly and that `open()` refused (a store on disk
/// after an OS crash), or any store whose reads or check report corruption, and repairs
/// it: every record's checksum is verified (whatever the clean flag says), entries whose
/// records cannot be trusted are dropped, everything else is rebuilt from what remains.
/// A truncated file is salvaged into a new store that replaces it (the original kept as
/// PATH.truncated). Returns the open store and a report dict: "found" (problems before
/// repair), "dropped" (list of (map name, slot description and why); keys are not
/// reported, they may be torn too) and "rebuilt". A sound store is returned with empty
/// lists. Raises `shoal.TooManyUsers` while the store is open elsewhere (in this
/// process too): a repair needs it alone.
#[pyfunction]
pub fn repair<'py>(py: Python<'py>, path: PathBuf) -> PyResult<(Store, Bound<'py, PyDict>)> {
    let (st, r) = py.detach(|| shoal::Store::repair(&path)).py_err(py)?;
    let d = PyDict::new(py);
    d.set_item("found", r.found)?;
    d.set_item("dropped", r.dropped)?;
    d.set_item("rebuilt", r.rebuilt)?;
    Ok((
        Store::wrap(st, shoal::Options::default().lock_timeout.as_secs_f64()),
        d,
    ))
}

/// backup_idle(path, file) -> int
///
/// Writes a consistent copy of the store at `path` (a bare name means
/// /dev/shm/NAME.shoal) into the new file `file`, while no process has the store open:
/// every map of every kind; the copy passes `check()`, and restoring it is a file copy.
/// Returns the bytes copied. Processes that open the store during the copy wait until it
/// is done. Raises `shoal.TooManyUsers` while the store is open anywhere (this process
/// included: close it first, or use `Store.backup`, the hot backup) and
/// `shoal.AlreadyExists` if `file` exists; `file` appears whole or not at all.
#[pyfunction]
pub fn backup_idle(py: Python<'_>, path: PathBuf, file: PathBuf) -> PyResult<u64> {
    py.detach(|| shoal::Store::backup_idle(&path, &file))
        .py_err(py)
}

/// remove(path, *, missing_ok=False) -> None
///
/// Deletes the store file (a bare name means /dev/shm/NAME.shoal). Processes that have
/// it open keep working on their mapping until they close it; later opens create a new,
/// empty store. A missing file raises `shoal.NotFound` unless `missing_ok=True`.
#[pyfunction]
#[pyo3(signature = (path, *, missing_ok = false))]
pub fn remove(py: Python<'_>, path: PathBuf, missing_ok: bool) -> PyResult<()> {
    match py.detach(|| shoal::Store::destroy(&path)) {
        Ok(()) => Ok(()),
        Err(shoal::Error::NotFound(_)) if missing_ok => Ok(()),
        Err(e) => Err(crate::errors::to_py(py, e)),
    }
}

/// resolve_path(path) -> str
///
/// The file a path or bare name refers to: a bare name (no '/') means /dev/shm/NAME.shoal.
#[pyfunction]
pub fn resolve_path(path: PathBuf) -> String {
    shoal::resolve_path(path).display().to_string()
}

/// A batch of writes to one store (`Store.batch()`): a context manager whose block's
/// writes, on the thread that entered it, are flushed once at its end under
/// `sync_writes`. Bound to its thread (the deferral is that thread's).
#[pyclass(module = "shoal", name = "Batch", unsendable)]
pub struct Batch {
    core: Arc<StoreCore>,
    /// The open batch and the store it flushes (kept open by this handle until the end,
    /// even if the `Store` is closed inside the block).
    open: Option<(shoal::Batch, Arc<shoal::Store>)>,
}

#[pymethods]
impl Batch {
    fn __enter__(mut slf: PyRefMut<'_, Self>) -> PyResult<PyRefMut<'_, Self>> {
        if slf.open.is_some() {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                "this shoal.Batch is already open; a block needs its own store.batch()",
            ));
        }
        let py = slf.py();
        let st = slf.core.store.load_full().ok_or_else(|| closed(py))?;
        slf.open = Some((st.begin_batch(), st));
        Ok(slf)
    }

    /// Ends the batch and, if it owes one, flushes (without the GIL). A failed flush is
    /// raised, also when the block raised (the flush error is chained to it by Python).
    #[pyo3(signature = (*_args))]
    fn __exit__(&mut self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if let Some((b, st)) = self.open.take() {
            if b.end_without_flush() {
                py.detach(|| st.flush()).py_err(py)?;
            }
        }
        Ok(false)
    }
}
