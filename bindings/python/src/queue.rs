//! `shoal.QueueSet` and `shoal.Element`: queue sets from Python.
//!
//! An element exports its bytes in place through the buffer protocol, and `data` is a
//! writable `memoryview` of it: no copy. The element counts the buffers it has exported
//! and not yet got back (a memoryview, its slices, which share its buffer, and whatever
//! was made from them: numpy arrays, ctypes objects). A push or a `keep` first releases
//! the memoryview `data` gave (so that a variable still naming it cannot touch bytes that
//! are another process's), then refuses with `BufferError`, the element staying held,
//! while any other buffer of the element is alive: no Python object can reach an element
//! after this process has given it away. An exported buffer holds a reference to its
//! element, and the element to its set, so the mapping outlives every buffer.

use crate::errors::ResultExt;
use pyo3::exceptions::{PyBufferError, PyStopIteration};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyMemoryView, PyWeakrefReference};
use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// A queue set (`store.queues(...)`): named queues that pass fixed-size elements between
/// processes by reference. Safe to share between threads.
#[pyclass(module = "shoal", name = "QueueSet", frozen)]
pub struct QueueSet {
    pub set: shoal::QueueSet,
}

/// An element of a queue set held by this process: `data` is a writable `memoryview` of
/// its bytes in place. Push it on with `QueueSet.push`; `with` gives it back where it came
/// from (or where `push_to` said) at the end of the block; `keep()` leaves it held.
#[pyclass(module = "shoal", name = "Element")]
pub struct Element {
    set: Py<QueueSet>,
    /// None once pushed, released or kept, and while a push is under way.
    held: Option<shoal::Held>,
    /// Where `release` and the end of a `with` block send it (default: where it came from).
    target: Option<shoal::Queue>,
    /// The memoryview `data` handed out, weakly: a strong reference would be a cycle (the
    /// view's buffer holds the element), and the element would never be given back.
    view: Option<Py<PyWeakrefReference>>,
    /// Buffers of the bytes exported and not yet released.
    exports: AtomicUsize,
}

fn queue_of(set: &shoal::QueueSet, q: usize) -> PyResult<shoal::Queue> {
    Python::attach(|py| set.queue_at(q).py_err(py))
}

impl Element {
    fn new(set: &Bound<'_, QueueSet>, e: shoal::Element<'_>) -> Element {
        Element {
            set: set.clone().unbind(),
            held: Some(e.into_held()),
            target: None,
            view: None,
            exports: AtomicUsize::new(0),
        }
    }

    fn held(&self) -> PyResult<shoal::Held> {
        self.held.ok_or_else(|| {
            crate::errors::invalid("the element was pushed or released: it is no longer held")
        })
    }

    /// What a push or a keep needs first: the memoryview `data` gave released, and no
    /// other buffer of the bytes alive. Holds no borrow of the element while the view is
    /// released (its release calls back into `__releasebuffer__`).
    fn let_go_of_bytes(slf: &Bound<'_, Element>) -> PyResult<()> {
        let view = slf.borrow_mut().view.take();
        if let Some(v) = view.and_then(|w| w.bind(slf.py()).upgrade()) {
            v.call_method0("release").map_err(|_| {
                PyBufferError::new_err(
                    "a buffer was made from the element's memoryview (a numpy array, say) \
                     and is alive: drop it before the element is pushed",
                )
            })?;
        }
        match slf.borrow().exports.load(Relaxed) {
            0 => Ok(()),
            n => Err(PyBufferError::new_err(format!(
                "{n} buffer(s) of the element's bytes are alive (a slice of its data, or an \
                 object made over it): drop or release them before the element is pushed"
            ))),
        }
    }

    /// Gives the element to `to` (or back where it came from), unless already gone. On
    /// failure it stays held.
    fn send(slf: &Bound<'_, Element>, to: Option<shoal::Queue>) -> PyResult<()> {
        let py = slf.py();
        let Some(h) = slf.borrow().held else {
            return Ok(());
        };
        Element::let_go_of_bytes(slf)?;
        // No new view while the GIL is released below.
        slf.borrow_mut().held = None;
        let set = slf.borrow().set.clone_ref(py);
        let set = &set.get().set;
        let r = py.detach(|| {
            let e = set.adopt(h)?;
            match to {
                Some(q) => set.try_push(q, e).map_err(|(err, back)| {
                    back.into_held();
                    err
                }),
                None => set.release(e),
            }
        });
        if r.is_err() {
            slf.borrow_mut().held = Some(h);
        }
        r.py_err(py)
    }
}

impl Drop for Element {
    fn drop(&mut self) {
        // No buffer of the bytes is alive: each would hold a reference to this element.
        let Some(h) = self.held.take() else { return };
        let set = self.set.get();
        // Nothing to report an error to: an element that cannot be given back stays held
        // by this process, and goes back when the process ends.
        let _ = set.set.adopt(h).and_then(|e| match self.target {
            Some(q) => set.set.try_push(q, e).map_err(|(err, back)| {
                back.into_held();
                err
            }),
            None => set.set.release(e),
        });
    }
}

#[pymethods]
impl Element {
    /// The element's index in its set: the same in every process.
    #[getter]
    fn index(&self) -> PyResult<u64> {
        Ok(self.held()?.index)
    }

    /// The index of the queue it was pulled from.
    #[getter(from_queue)]
    fn origin_queue(&self) -> PyResult<usize> {
        Ok(self.held()?.from.index())
    }

    /// Whether it is back in its queue because a process died holding it.
    #[getter]
    fn redelivered(&self) -> PyResult<bool> {
        Ok(self.held()?.redelivered)
    }

    /// A writable memoryview of the element's bytes, in place (the same view each time
    /// while it is alive).
    #[getter]
    fn data<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        slf.borrow().held()?;
        let cached = slf.borrow().view.as_ref().map(|w| w.clone_ref(py));
        if let Some(v) = cached.and_then(|w| w.bind(py).upgrade()) {
            // Unless its holder released it.
            if v.getattr("readonly").is_ok() {
                return Ok(v);
            }
        }
        let v = PyMemoryView::from(slf.as_any())?.into_any();
        slf.borrow_mut().view = Some(PyWeakrefReference::new(&v)?.unbind());
        Ok(v)
    }

    /// The buffer protocol: the element's bytes, writable, in place.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        let py = slf.py();
        let (ptr, len) = {
            let b = slf.borrow();
            let set = &b.set.get().set;
            let e = set.adopt(b.held()?).py_err(py)?;
            let r = (e.as_ptr(), e.len());
            e.into_held();
            r
        };
        // SAFETY: `view` is the Py_buffer the caller passed to fill; `ptr` is the element's
        // first byte in the store's mapping and `len` its size. The buffer holds a
        // reference to this element (FillInfo sets `view.obj`), and the element to its
        // set, which keeps the mapping: the bytes stay mapped while the buffer lives, and
        // stay this process's (a push refuses while `exports` is not 0).
        let rc = unsafe {
            pyo3::ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                ptr.cast(),
                len as pyo3::ffi::Py_ssize_t,
                0,
                flags,
            )
        };
        if rc != 0 {
            return Err(PyErr::fetch(py));
        }
        slf.borrow().exports.fetch_add(1, Relaxed);
        Ok(())
    }

    unsafe fn __releasebuffer__(&self, _view: *mut pyo3::ffi::Py_buffer) {
        self.exports.fetch_sub(1, Relaxed);
    }

    fn __len__(&self) -> PyResult<usize> {
        self.held()?;
        Ok(self.set.get().set.element_size())
    }

    /// push_to(queue) -> None: where the element goes at the end of a `with` block or on
    /// `release()` (default: the queue it came from).
    fn push_to(&mut self, queue: usize) -> PyResult<()> {
        self.held()?;
        self.target = Some(queue_of(&self.set.get().set, queue)?);
        Ok(())
    }

    /// release() -> None: gives the element to where `push_to` said, or back to the
    /// queue it came from.
    fn release(slf: &Bound<'_, Self>) -> PyResult<()> {
        let to = slf.borrow().target;
        Element::send(slf, to)
    }

    /// keep() -> None: leaves the element held by this process, with no Python object
    /// for it (it goes back when the process ends).
    fn keep(slf: &Bound<'_, Self>) -> PyResult<()> {
        slf.borrow().held()?;
        Element::let_go_of_bytes(slf)?;
        slf.borrow_mut().held = None;
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(slf: &Bound<'_, Self>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        let to = slf.borrow().target;
        Element::send(slf, to)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match self.held {
            Some(h) => format!("<shoal.Element {} from queue {}>", h.index, h.from.index()),
            None => "<shoal.Element (pushed)>".into(),
        }
    }
}

/// Pulls from `queues` of `set`, waiting up to `timeout` (None: for ever), with the GIL
/// released while it waits, and Ctrl-C honoured every 100 ms.
fn pull_waiting(
    set: &Bound<'_, QueueSet>,
    queues: &[shoal::Queue],
    timeout: Option<f64>,
) -> PyResult<Option<Element>> {
    let py = set.py();
    let s = &set.get().set;
    if let Some(e) = s.pull_any(queues, Duration::ZERO).py_err(py)? {
        return Ok(Some(Element::new(set, e)));
    }
    let start = Instant::now();
    loop {
        let left = match timeout {
            Some(t) => Duration::from_secs_f64(t.max(0.0)).saturating_sub(start.elapsed()),
            None => Duration::from_millis(100),
        };
        if left.is_zero() {
            return Ok(None);
        }
        let step = left.min(Duration::from_millis(100));
        let got = py
            .detach(|| s.pull_any(queues, step).map(|o| o.map(|e| e.into_held())))
            .py_err(py)?;
        if let Some(h) = got {
            return Ok(Some(Element::new(set, s.adopt(h).py_err(py)?)));
        }
        py.check_signals()?;
    }
}

#[pymethods]
impl QueueSet {
    /// The set's name.
    #[getter]
    fn name(&self) -> &str {
        self.set.name()
    }

    /// Bytes per element.
    #[getter]
    fn element_size(&self) -> usize {
        self.set.element_size()
    }

    /// Elements in the set.
    #[getter]
    fn elements(&self) -> u64 {
        self.set.elements()
    }

    /// The names of the queues, by index.
    #[getter]
    fn queue_names(&self) -> Vec<String> {
        self.set.queue_names().to_vec()
    }

    /// queue(name) -> int: the index of the queue `name` (what the other methods take).
    fn queue(&self, py: Python<'_>, name: &str) -> PyResult<usize> {
        Ok(self.set.queue(name).py_err(py)?.index())
    }

    /// pull(queue) -> Element | None: the element at the head of the queue, or None at
    /// once if it is empty.
    fn pull(slf: &Bound<'_, Self>, queue: usize) -> PyResult<Option<Element>> {
        let s = &slf.get().set;
        let q = queue_of(s, queue)?;
        Ok(s.pull(q).py_err(slf.py())?.map(|e| Element::new(slf, e)))
    }

    /// pull_wait(queue, timeout=None) -> Element | None: as pull, waiting up to `timeout`
    /// seconds (None: for ever) for a push from any process, with the GIL released.
    #[pyo3(signature = (queue, timeout = None))]
    fn pull_wait(
        slf: &Bound<'_, Self>,
        queue: usize,
        timeout: Option<f64>,
    ) -> PyResult<Option<Element>> {
        let q = queue_of(&slf.get().set, queue)?;
        pull_waiting(slf, &[q], timeout)
    }

    /// pull_any(queues, timeout=None) -> Element | None: the first element pushed to any of
    /// `queues` (its `from_queue` says which), waiting as pull_wait.
    #[pyo3(signature = (queues, timeout = None))]
    fn pull_any(
        slf: &Bound<'_, Self>,
        queues: Vec<usize>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Element>> {
        let s = &slf.get().set;
        let qs = queues
            .into_iter()
            .map(|q| queue_of(s, q))
            .collect::<PyResult<Vec<_>>>()?;
        pull_waiting(slf, &qs, timeout)
    }

    /// pull_many(queue, n) -> list[Element]: up to `n` elements from the head of the queue,
    /// in one step.
    fn pull_many(slf: &Bound<'_, Self>, queue: usize, n: usize) -> PyResult<Vec<Element>> {
        let s = &slf.get().set;
        let q = queue_of(s, queue)?;
        Ok(s.pull_many(q, n)
            .py_err(slf.py())?
            .into_iter()
            .map(|e| Element::new(slf, e))
            .collect())
    }

    /// push(queue, element) -> None: puts the element at the tail of the queue; it is no
    /// longer this process's. At a depth limit raises shoal.QueueFull and the element
    /// stays held.
    fn push(&self, queue: usize, element: &Bound<'_, Element>) -> PyResult<()> {
        let q = queue_of(&self.set, queue)?;
        Element::send(element, Some(q))
    }

    /// push_many(queue, elements) -> None: puts every element at the tail of the queue, in
    /// order, in one step: all of them, or (shoal.QueueFull) none, which stay held.
    fn push_many(
        &self,
        py: Python<'_>,
        queue: usize,
        elements: Vec<Bound<'_, Element>>,
    ) -> PyResult<()> {
        let q = queue_of(&self.set, queue)?;
        let mut held = Vec::with_capacity(elements.len());
        for e in &elements {
            let h = e.borrow().held()?;
            if held.iter().any(|x: &shoal::Held| x.index == h.index) {
                return Err(crate::errors::invalid(
                    "push_many given the same element twice",
                ));
            }
            held.push(h);
        }
        for e in &elements {
            Element::let_go_of_bytes(e)?;
        }
        // No new view while the GIL is released below.
        for e in &elements {
            e.borrow_mut().held = None;
        }
        let s = &self.set;
        let r = py.detach(|| {
            let adopted = held
                .iter()
                .map(|h| s.adopt(*h))
                .collect::<shoal::Result<Vec<_>>>()?;
            s.try_push_many(q, adopted).map_err(|(err, back)| {
                for e in back {
                    e.into_held();
                }
                err
            })
        });
        if r.is_err() {
            for (e, h) in elements.iter().zip(&held) {
                e.borrow_mut().held = Some(*h);
            }
        }
        r.py_err(py)?;
        Ok(())
    }

    /// move(frm, to, n) -> int: moves up to `n` elements from the head of `frm` to the tail
    /// of `to` in one step (within `to`'s depth limit); how many moved.
    #[pyo3(name = "move")]
    fn move_to(&self, py: Python<'_>, frm: usize, to: usize, n: usize) -> PyResult<usize> {
        let (f, t) = (queue_of(&self.set, frm)?, queue_of(&self.set, to)?);
        self.set.move_to(f, t, n).py_err(py)
    }

    /// len(queue) -> int: elements in the queue now.
    fn len(&self, py: Python<'_>, queue: usize) -> PyResult<u64> {
        let q = queue_of(&self.set, queue)?;
        self.set.len(q).py_err(py)
    }

    /// stats(queue) -> dict: name, len, limit, pushes, pulls, waits.
    fn stats<'py>(&self, py: Python<'py>, queue: usize) -> PyResult<Bound<'py, PyDict>> {
        let q = queue_of(&self.set, queue)?;
        let st = self.set.stats(q).py_err(py)?;
        let d = PyDict::new(py);
        d.set_item("name", st.name)?;
        d.set_item("len", st.len)?;
        d.set_item("limit", st.limit)?;
        d.set_item("pushes", st.pushes)?;
        d.set_item("pulls", st.pulls)?;
        d.set_item("waits", st.waits)?;
        Ok(d)
    }

    /// held() -> list[tuple[int, int]]: (pid, elements) of every process holding some.
    fn held(&self, py: Python<'_>) -> PyResult<Vec<(u32, u64)>> {
        Ok(self
            .set
            .held()
            .py_err(py)?
            .into_iter()
            .map(|h| (h.pid, h.elements))
            .collect())
    }

    /// reclaim() -> int: hands back the elements of processes that died holding some; how
    /// many went back.
    fn reclaim(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.set.reclaim()).py_err(py)
    }

    /// iter(queue, timeout=None) -> iterator of Element: pulls from the queue for as long
    /// as elements come, waiting up to `timeout` seconds for each (None: for ever).
    #[pyo3(signature = (queue, timeout = None))]
    fn iter(slf: &Bound<'_, Self>, queue: usize, timeout: Option<f64>) -> PyResult<QueueIter> {
        let q = queue_of(&slf.get().set, queue)?;
        Ok(QueueIter {
            set: slf.clone().unbind(),
            queue: q,
            timeout,
        })
    }
}

/// The iterator of `QueueSet.iter`.
#[pyclass(module = "shoal")]
pub struct QueueIter {
    set: Py<QueueSet>,
    queue: shoal::Queue,
    timeout: Option<f64>,
}

#[pymethods]
impl QueueIter {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Element> {
        let set = self.set.bind(py);
        match pull_waiting(set, &[self.queue], self.timeout)? {
            Some(e) => Ok(e),
            None => Err(PyStopIteration::new_err(())),
        }
    }
}

/// Opens the queue set `name` of `store`, creating it if `element_size` and `elements`
/// are given and there is none.
#[allow(clippy::too_many_arguments)]
pub fn open(
    py: Python<'_>,
    store: &shoal::Store,
    name: &str,
    element_size: Option<usize>,
    elements: Option<u64>,
    queues: Vec<String>,
    limits: Option<Bound<'_, PyDict>>,
    initial: &str,
    redeliver: bool,
) -> PyResult<QueueSet> {
    let set = match (element_size, elements) {
        (Some(size), Some(n)) => {
            let mut o = shoal::QueueSetOptions::new(size, n).initial(initial);
            for q in &queues {
                let limit = match &limits {
                    Some(l) => l.get_item(q)?.map(|v| v.extract::<u64>()).transpose()?,
                    None => None,
                };
                o = o.queue_with_limit(q, limit.unwrap_or(0));
            }
            py.detach(|| store.queue_set(name, &o.redeliver(redeliver)))
        }
        (None, None) => py.detach(|| store.open_queue_set(name)),
        _ => {
            return Err(crate::errors::invalid(
                "give both element_size and elements (to create the set), or neither",
            ))
        }
    }
    .py_err(py)?;
    Ok(QueueSet { set })
}
