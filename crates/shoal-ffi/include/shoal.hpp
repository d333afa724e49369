// shoal.hpp -- header-only C++17 wrapper over the C API in shoal.h.
//
//   shoal::Store store("demo");                  // /dev/shm/demo.shoal, created if absent
//   shoal::Map users = store.map("users");
//   users.put("alice", "admin");
//   std::optional<std::string> v = users.get("alice");
//   for (const auto& [key, value] : users) { ... }
//
// Handles are RAII and move-only. Keys and values are byte strings: every input is a
// shoal::bytes_view, made implicitly from std::string_view, std::string, a string literal
// or a contiguous container of bytes (std::vector<char>, std::vector<uint8_t>,
// std::array<std::byte, N>...), or explicitly from a (const void*, size_t) pair:
// `map.put({ptr, len}, value)`.
//
// Errors are exceptions (shoal::Error, a std::runtime_error carrying the shoal_status).
// Why exceptions rather than status codes or std::expected-like results:
//  * what they report is rare and not local -- a corrupt or foreign file, a full disk,
//    a lock timeout, too many processes -- and the caller that can do something about it
//    is usually far up the stack; an exception gets it there without every layer
//    forwarding codes, and cannot be silently ignored;
//  * they keep the common calls value-returning (`auto v = map.get(k);`);
//  * outcomes that are expected are NOT exceptions: a missing key is an empty
//    std::optional or `false` (get, put_if_absent, put_if_present, remove, take,
//    drop_map), so no exception is thrown on a normal path.
// Only shoal::Error and std::bad_alloc are thrown by this header itself; an exception
// thrown by your callback (visit, for_each) is carried across the C library and rethrown
// from the call that ran it.
//
// Thread safety: as in C. A Store or Map may be used from many threads at once; an
// iterator from one thread at a time.
#ifndef SHOAL_HPP
#define SHOAL_HPP

#include "shoal.h"

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace shoal {

/// The error every failing call throws: what() says what happened, code() which
/// shoal_status the C API returned.
class Error : public std::runtime_error {
public:
    Error(shoal_status code, const std::string& what) : std::runtime_error(what), code_(code) {}
    /// The status (SHOAL_NOT_FOUND, SHOAL_CORRUPT, ...).
    shoal_status code() const noexcept { return code_; }

private:
    shoal_status code_;
};

namespace detail {

[[noreturn]] inline void raise(shoal_status rc, const char* call) {
    std::string msg(call);
    msg += ": ";
    msg += shoal_strerror(rc);
    const char* detail = shoal_last_error_message();
    if (detail != nullptr && *detail != '\0') {
        msg += ": ";
        msg += detail;
    }
    throw Error(rc, msg);
}

inline void check(shoal_status rc, const char* call) {
    if (rc != SHOAL_OK) raise(rc, call);
}

template <class E>
struct is_byte : std::bool_constant<sizeof(E) == 1 && std::is_trivially_copyable_v<E>> {};

template <class T, class = void>
struct is_byte_container : std::false_type {};
template <class T>
struct is_byte_container<T, std::void_t<decltype(std::data(std::declval<const T&>())),
                                        decltype(std::size(std::declval<const T&>()))>> {
    using E = std::remove_cv_t<std::remove_pointer_t<decltype(std::data(std::declval<const T&>()))>>;
    static constexpr bool value =
        std::conjunction_v<std::negation<std::is_convertible<const T&, std::string_view>>,
                           std::negation<std::is_void<E>>, is_byte<E>>;
};

/// A callback's context: the user's callable and an exception it threw, to rethrow.
template <class F>
struct Thunk {
    F* f;
    std::exception_ptr error;
};

}  // namespace detail

/// A view of bytes: a key or a value passed in.
class bytes_view {
public:
    constexpr bytes_view() noexcept = default;
    /// `size` bytes at `data` (which may be null when size is 0).
    constexpr bytes_view(const void* data, std::size_t size) noexcept : data_(data), size_(size) {}
    constexpr bytes_view(std::string_view s) noexcept : data_(s.data()), size_(s.size()) {}
    bytes_view(const std::string& s) noexcept : data_(s.data()), size_(s.size()) {}
    constexpr bytes_view(const char* s) noexcept : bytes_view(std::string_view(s)) {}
    /// Any contiguous container of byte-sized elements (vector<uint8_t>, array<std::byte,N>).
    template <class C, std::enable_if_t<detail::is_byte_container<C>::value, int> = 0>
    bytes_view(const C& c) noexcept : data_(std::data(c)), size_(std::size(c)) {}

    constexpr const void* data() const noexcept { return data_; }
    constexpr std::size_t size() const noexcept { return size_; }
    constexpr bool empty() const noexcept { return size_ == 0; }
    std::string_view str() const noexcept {
        return std::string_view(static_cast<const char*>(data_), size_);
    }

private:
    const void* data_ = nullptr;
    std::size_t size_ = 0;
};

/// What a put did.
enum class PutOutcome { Inserted, Replaced };

/// Options of Store (see shoal_options in shoal.h; 0 means the default everywhere).
struct Options {
    /// SHOAL_OPEN_OR_CREATE (default), SHOAL_OPEN_EXISTING or SHOAL_CREATE_NEW.
    shoal_open_mode open_mode = SHOAL_OPEN_OR_CREATE;
    /// Permission bits of a new file (default 0600).
    std::uint32_t file_mode = 0;
    /// Largest size the file may grow to (default 1 TiB).
    std::uint64_t max_size = 0;
    /// Bytes allocated at creation.
    std::uint64_t initial_size = 0;
    /// Unit of growth, a power of two from 64 KiB to 64 MiB (default 256 KiB).
    std::uint64_t chunk_size = 0;
    /// How long to wait for a lock held by a live process (default 5 s).
    std::chrono::milliseconds lock_timeout{0};
    std::uint32_t max_processes = 0;
    std::uint32_t max_threads = 0;
    std::uint32_t max_maps = 0;
    /// Record checksums: nullopt = default (on for disk files, off on tmpfs).
    std::optional<bool> checksums;
    /// Flush after every write call (disk files).
    bool sync_writes = false;

    shoal_options to_c() const {
        shoal_options o{};
        o.struct_size = sizeof o;
        o.open_mode = open_mode;
        o.file_mode = file_mode;
        o.max_size = max_size;
        o.initial_size = initial_size;
        o.chunk_size = chunk_size;
        auto ms = lock_timeout.count();
        o.lock_timeout_ms = ms <= 0 ? 0 : ms > 0xffffffffLL ? 0xffffffffU
                                                             : static_cast<std::uint32_t>(ms);
        o.max_processes = max_processes;
        o.max_threads = max_threads;
        o.max_maps = max_maps;
        o.checksums = !checksums ? 0u : *checksums ? 1u : 2u;
        o.sync_writes = sync_writes ? 1u : 0u;
        return o;
    }
};

/// A key or value type a map records when it is created (FORMAT.md, "Key and value
/// types"): a SHOAL_TYPE_ code, and the application's tag for SHOAL_TYPE_USER.
struct DataType {
    std::uint32_t code = SHOAL_TYPE_NONE;
    std::uint64_t tag = 0;
    bool operator==(const DataType& o) const noexcept { return code == o.code && tag == o.tag; }
    bool operator!=(const DataType& o) const noexcept { return !(*this == o); }
};

/// Options a map is created with (see shoal_map_options; 0 means the default).
struct MapOptions {
    std::uint32_t segment_buckets = 0;
    std::uint32_t stash_buckets = 0;
    /// Keep a stable Uid per key (Map::uid and the *_by_uid calls). Chosen at creation.
    bool uids = false;
    /// The key and value types to record (none by default); an existing map that
    /// recorded others throws.
    DataType key_type{};
    DataType value_type{};
};

/// Options a fixed-size map is created with (see shoal_fixed_options; 0 means the
/// default). An existing map keeps the options it was created with.
struct FixedOptions {
    /// Main buckets per index segment, 1..=4096 (default: segments of about 8 KiB).
    std::uint32_t segment_buckets = 0;
    /// Stash buckets per segment, 1..=1024 (default: a sixteenth of the buckets).
    std::uint32_t stash_buckets = 0;
    /// The key and value types to record (the numbers need 8-byte cells).
    DataType key_type{};
    DataType value_type{};
};

/// A stable handle on one key of a map with UIDs (Map::uid, Map::put_uid): valid while
/// the key exists, however often its value is replaced. Once the key is removed the
/// by-UID calls throw shoal::Error with code() == SHOAL_STALE_UID, even after the table
/// entry is reused by another key. to_u32() is the bare index (no generation): a handle
/// rebuilt with from_u32() detects a removed key but names a later key that reuses the
/// entry -- keep 32-bit forms only where keys are not removed while they are held.
class Uid {
public:
    constexpr Uid() noexcept = default;
    /// From the 64-bit form (to_u64()).
    constexpr explicit Uid(std::uint64_t v) noexcept : v_(v) {}
    /// From the 32-bit form (to_u32()): no generation check.
    static constexpr Uid from_u32(std::uint32_t v) noexcept {
        return Uid(static_cast<std::uint64_t>(v) | SHOAL_UID_UNCHECKED);
    }
    /// The 64-bit form, the handle the C API takes; never 0 for a real handle.
    constexpr std::uint64_t to_u64() const noexcept { return v_; }
    /// The 32-bit form: the bare table index.
    constexpr std::uint32_t to_u32() const noexcept { return static_cast<std::uint32_t>(v_); }
    friend constexpr bool operator==(Uid a, Uid b) noexcept { return a.v_ == b.v_; }
    friend constexpr bool operator!=(Uid a, Uid b) noexcept { return a.v_ != b.v_; }

private:
    std::uint64_t v_ = 0;
};

/// What Store::check found.
struct CheckResult {
    shoal_check_report report{};
    std::vector<std::string> problems;
    bool ok() const noexcept { return problems.empty(); }
};

class Map;
class FixedMap;
class TxnMapRef;
class Transaction;
class OrderedMap;

/// What kind of map a name is (Store::map_kind).
struct MapKind {
    /// SHOAL_MAP_KIND_VARIABLE, SHOAL_MAP_KIND_VARIABLE_UIDS or SHOAL_MAP_KIND_FIXED.
    std::uint32_t kind = 0;
    /// Bytes per key and per value of a fixed-size map (0 for the other kinds).
    std::size_t key_size = 0;
    std::size_t value_size = 0;
    bool fixed() const noexcept { return kind == SHOAL_MAP_KIND_FIXED; }
    /// Whether it is an ordered map (Store::ordered_map).
    bool ordered() const noexcept { return kind == SHOAL_MAP_KIND_ORDERED; }
};

/// An open store. Move-only; closes its handle when destroyed. Usable from many threads.
class Store {
public:
    /// Opens (or creates, per `opts.open_mode`) the store at `path`; a bare name means
    /// /dev/shm/NAME.shoal. Throws shoal::Error.
    explicit Store(const std::string& path, const Options& opts = {}) {
        shoal_options o = opts.to_c();
        shoal_store* s = nullptr;
        detail::check(shoal_store_open(path.c_str(), &o, &s), "shoal_store_open");
        h_.reset(s);
    }

    /// Deletes the store file; returns false if there was none.
    static bool destroy(const std::string& path) {
        shoal_status rc = shoal_store_destroy(path.c_str());
        if (rc == SHOAL_NOT_FOUND) return false;
        detail::check(rc, "shoal_store_destroy");
        return true;
    }

    /// Opens the map `name`, creating it (with `opts`) if absent and `create`.
    /// Throws shoal::Error (SHOAL_NOT_FOUND when absent and !create).
    Map map(std::string_view name, bool create = true, const MapOptions& opts = {}) const;

    /// Opens the fixed-size map `name` (keys of `key_size` bytes, values of `value_size`),
    /// creating it (with `opts`) if absent and `create`. Throws shoal::Error
    /// (SHOAL_NOT_FOUND when absent and !create; SHOAL_INVALID for other sizes, a
    /// variable-size map or options out of range).
    FixedMap fixed_map(std::string_view name, std::size_t key_size, std::size_t value_size,
                       bool create = true, const FixedOptions& opts = {}) const;

    /// A new multi-key transaction on this store's hash maps, fixed-size and variable-size
    /// mixed (see Transaction).
    Transaction transaction() const;

    /// Reads (map, key) pairs as of one instant (shoal_snapshot_get): every value was its
    /// key's value at the same moment (nullopt: absent then). Each map is a FixedMap or a
    /// Map (a pointer or a reference). Takes no lock. Throws shoal::Error (SHOAL_TIMEOUT
    /// past the store's lock timeout).
    std::vector<std::optional<std::string>> snapshot_get(
        const std::vector<std::pair<TxnMapRef, bytes_view>>& keys) const;

    /// Opens the ordered map `name`, creating it if absent and `create`. Throws
    /// shoal::Error (SHOAL_NOT_FOUND when absent and !create).
    OrderedMap ordered_map(std::string_view name, bool create = true) const;

    /// The kind of the map `name`, or nullopt if there is none.
    std::optional<MapKind> map_kind(std::string_view name) const {
        std::string n(name);
        MapKind k;
        shoal_status rc =
            shoal_map_kind(h_.get(), n.c_str(), &k.kind, &k.key_size, &k.value_size);
        if (rc == SHOAL_NOT_FOUND) return std::nullopt;
        detail::check(rc, "shoal_map_kind");
        return k;
    }

    /// Names of the maps in the store.
    std::vector<std::string> maps() const {
        std::vector<std::string> out;
        auto cb = [](void* ctx, const char* name, std::size_t len) -> int {
            try {
                static_cast<std::vector<std::string>*>(ctx)->emplace_back(name, len);
                return 0;
            } catch (...) {
                return 1;  // out of memory: stop; reported below
            }
        };
        detail::check(shoal_store_maps(h_.get(), cb, &out), "shoal_store_maps");
        return out;
    }

    /// Drops a map and its entries; returns false if there was no such map.
    bool drop_map(std::string_view name) const {
        std::string n(name);
        shoal_status rc = shoal_store_drop_map(h_.get(), n.c_str());
        if (rc == SHOAL_NOT_FOUND) return false;
        detail::check(rc, "shoal_store_drop_map");
        return true;
    }

    shoal_store_stats stats() const {
        shoal_store_stats s{};
        s.struct_size = sizeof s;
        detail::check(shoal_store_get_stats(h_.get(), &s), "shoal_store_get_stats");
        return s;
    }

    /// Verifies the store; problems are returned, not thrown (other failures throw).
    CheckResult check() const {
        CheckResult r;
        r.report.struct_size = sizeof r.report;
        auto cb = [](void* ctx, const char* text, std::size_t len) -> int {
            try {
                static_cast<std::vector<std::string>*>(ctx)->emplace_back(text, len);
                return 0;
            } catch (...) {
                return 1;
            }
        };
        shoal_status rc = shoal_store_check(h_.get(), &r.report, cb, &r.problems);
        if (rc == SHOAL_CORRUPT && r.report.problems > 0) return r;
        detail::check(rc, "shoal_store_check");
        return r;
    }

    /// Reclaims dead space now, then returns the free chunks' pages to the filesystem
    /// (the memory of a store in /dev/shm); returns the chunks freed.
    std::uint64_t compact() const {
        std::uint64_t n = 0;
        detail::check(shoal_store_compact(h_.get(), &n), "shoal_store_compact");
        return n;
    }

    /// Writes a copy of the whole store as of one instant into the new file `file` while
    /// readers and writers keep going (the hot backup, shoal_store_backup); returns the
    /// bytes the copy spans. Throws shoal::Error (SHOAL_EXISTS when `file` exists).
    std::uint64_t backup(const std::string& file) const {
        std::uint64_t n = 0;
        detail::check(shoal_store_backup(h_.get(), file.c_str(), &n), "shoal_store_backup");
        return n;
    }

    /// Writes everything through to stable storage (msync + fsync); for stores on disk.
    void flush() const { detail::check(shoal_store_flush(h_.get()), "shoal_store_flush"); }

    /// Opens a store on disk that was not closed cleanly and that the constructor refused,
    /// dropping what cannot be trusted (see shoal_store_repair). `report`, if given,
    /// receives the report's lines.
    static Store repair(const std::string& path, std::vector<std::string>* report = nullptr) {
        shoal_store* s = nullptr;
        auto cb = [](void* ctx, const char* text, std::size_t len) -> int {
            try {
                static_cast<std::vector<std::string>*>(ctx)->emplace_back(text, len);
                return 0;
            } catch (...) {
                return 1;
            }
        };
        detail::check(shoal_store_repair(path.c_str(), &s, nullptr, report ? +cb : nullptr, report),
                      "shoal_store_repair");
        return Store(s);
    }

    /// The store file's path.
    std::string path() const {
        std::string p(64, '\0');
        for (;;) {
            std::size_t len = 0;
            shoal_status rc = shoal_store_path(h_.get(), p.data(), p.size(), &len);
            if (rc == SHOAL_BUFFER_TOO_SMALL) {
                p.resize(len + 1);
                continue;
            }
            detail::check(rc, "shoal_store_path");
            p.resize(len);
            return p;
        }
    }

    /// The C handle, for calls this wrapper does not cover. Owned by this object.
    shoal_store* handle() const noexcept { return h_.get(); }

private:
    explicit Store(shoal_store* s) noexcept : h_(s) {}
    struct Close {
        void operator()(shoal_store* s) const noexcept { shoal_store_close(s); }
    };
    std::unique_ptr<shoal_store, Close> h_;
};

/// A batch of writes to one store on this thread (shoal_batch_begin): with sync_writes,
/// the thread's writes to the store are flushed once, when the batch ends, instead of
/// once each. Bound to the thread that made it (neither copyable nor movable). end()
/// throws a failed flush; the destructor ends an open batch and cannot report one.
class Batch {
public:
    explicit Batch(const Store& store) {
        detail::check(shoal_batch_begin(store.handle(), &b_), "shoal_batch_begin");
    }
    Batch(const Batch&) = delete;
    Batch& operator=(const Batch&) = delete;
    ~Batch() {
        if (b_) shoal_batch_end(b_);
    }

    /// Ends the batch and flushes once (with sync_writes). Throws shoal::Error.
    void end() {
        shoal_batch* b = b_;
        b_ = nullptr;
        if (b) detail::check(shoal_batch_end(b), "shoal_batch_end");
    }

private:
    shoal_batch* b_ = nullptr;
};

/// A named map. Move-only; closes its handle when destroyed (the map stays in the
/// store). Usable from many threads at once. Range-for yields (key, value) pairs.
class Map {
public:
    class iterator;
    struct sentinel {};

    /// The value of `key`, or nullopt.
    std::optional<std::string> get(bytes_view key) const {
        std::string v;
        if (!get_into(key, v)) return std::nullopt;
        return v;
    }

    /// Copies the value of `key` into `out` (reusing its capacity); false if absent.
    bool get_into(bytes_view key, std::string& out) const {
        if (out.capacity() > out.size()) out.resize(out.capacity());
        for (;;) {
            std::size_t len = 0;
            shoal_status rc =
                shoal_map_get(h_.get(), key.data(), key.size(), out.data(), out.size(), &len);
            if (rc == SHOAL_OK) {
                out.resize(len);
                return true;
            }
            if (rc == SHOAL_NOT_FOUND) {
                out.clear();
                return false;
            }
            if (rc != SHOAL_BUFFER_TOO_SMALL) detail::raise(rc, "shoal_map_get");
            out.resize(len);  // the value may change meanwhile: loop
        }
    }

    /// Calls `f(std::string_view value)` with the value of `key` (valid only during the
    /// call), without copying it into a std::string; false (f not called) if absent.
    template <class F>
    bool visit(bytes_view key, F&& f) const {
        using Fn = std::remove_reference_t<F>;
        detail::Thunk<Fn> t{&f, nullptr};
        auto cb = [](void* ctx, const void* v, std::size_t len) {
            auto* t = static_cast<detail::Thunk<Fn>*>(ctx);
            try {
                (*t->f)(std::string_view(static_cast<const char*>(v), len));
            } catch (...) {
                t->error = std::current_exception();
            }
        };
        shoal_status rc = shoal_map_get_cb(h_.get(), key.data(), key.size(), cb, &t);
        if (t.error) std::rethrow_exception(t.error);
        if (rc == SHOAL_NOT_FOUND) return false;
        detail::check(rc, "shoal_map_get_cb");
        return true;
    }

    /// Inserts or replaces; says which.
    PutOutcome put(bytes_view key, bytes_view value) const {
        bool replaced = false;
        detail::check(shoal_map_put(h_.get(), key.data(), key.size(), value.data(), value.size(),
                                    &replaced),
                      "shoal_map_put");
        return replaced ? PutOutcome::Replaced : PutOutcome::Inserted;
    }

    /// Inserts only if absent; false if the key was present (nothing changed).
    bool put_if_absent(bytes_view key, bytes_view value) const {
        shoal_status rc = shoal_map_put_if_absent(h_.get(), key.data(), key.size(),
                                                     value.data(), value.size());
        if (rc == SHOAL_EXISTS) return false;
        detail::check(rc, "shoal_map_put_if_absent");
        return true;
    }

    /// Replaces only if present; false if the key was absent (nothing changed).
    bool put_if_present(bytes_view key, bytes_view value) const {
        shoal_status rc = shoal_map_put_if_present(h_.get(), key.data(), key.size(),
                                                      value.data(), value.size());
        if (rc == SHOAL_NOT_FOUND) return false;
        detail::check(rc, "shoal_map_put_if_present");
        return true;
    }

    /// The former name of `put_if_absent` (stays for one release).
    [[deprecated("renamed put_if_absent")]] bool insert(bytes_view key, bytes_view value) const {
        return put_if_absent(key, value);
    }

    /// The former name of `put_if_present` (stays for one release).
    [[deprecated("renamed put_if_present")]] bool replace(bytes_view key,
                                                          bytes_view value) const {
        return put_if_present(key, value);
    }

    /// Removes `key`; false if it was absent.
    bool remove(bytes_view key) const {
        shoal_status rc = shoal_map_remove(h_.get(), key.data(), key.size(), nullptr, 0, nullptr);
        if (rc == SHOAL_NOT_FOUND) return false;
        detail::check(rc, "shoal_map_remove");
        return true;
    }

    /// Removes `key` and returns its old value, or nullopt if it was absent.
    std::optional<std::string> take(bytes_view key) const {
        std::optional<std::string> out;
        auto cb = [](void* ctx, const void* v, std::size_t len) {
            auto* o = static_cast<std::pair<std::optional<std::string>*, bool>*>(ctx);
            try {
                o->first->emplace(static_cast<const char*>(v), len);
            } catch (...) {
                o->second = true;
            }
        };
        std::pair<std::optional<std::string>*, bool> ctx{&out, false};
        shoal_status rc = shoal_map_take(h_.get(), key.data(), key.size(), cb, &ctx);
        if (ctx.second) throw std::bad_alloc();
        if (rc == SHOAL_NOT_FOUND) return std::nullopt;
        detail::check(rc, "shoal_map_take");
        return out;
    }

    /// Inserts or replaces, returning the previous value (nullopt if there was none).
    std::optional<std::string> swap(bytes_view key, bytes_view value) const {
        std::optional<std::string> old;
        auto cb = [](void* ctx, const void* v, std::size_t len) {
            auto* o = static_cast<std::pair<std::optional<std::string>*, bool>*>(ctx);
            try {
                o->first->emplace(static_cast<const char*>(v), len);
            } catch (...) {
                o->second = true;  // out of memory: thrown below, not through the C library
            }
        };
        std::pair<std::optional<std::string>*, bool> ctx{&old, false};
        shoal_status rc = shoal_map_swap(h_.get(), key.data(), key.size(), value.data(),
                                         value.size(), nullptr, cb, &ctx);
        if (ctx.second) throw std::bad_alloc();
        detail::check(rc, "shoal_map_swap");
        return old;
    }

    /// Atomically: if the value of `key` is `expected` (nullopt: the key is absent), sets
    /// it to `desired` (nullopt: removes it). Returns whether it did.
    bool compare_and_swap(bytes_view key, std::optional<bytes_view> expected,
                          std::optional<bytes_view> desired) const {
        std::uint32_t flags = (expected ? 0u : SHOAL_CAS_EXPECT_ABSENT) |
                              (desired ? 0u : SHOAL_CAS_REMOVE);
        bytes_view e = expected.value_or(bytes_view()), d = desired.value_or(bytes_view());
        shoal_status rc = shoal_map_compare_and_swap(h_.get(), key.data(), key.size(), e.data(),
                                                     e.size(), d.data(), d.size(), flags);
        if (rc == SHOAL_MISMATCH) return false;
        detail::check(rc, "shoal_map_compare_and_swap");
        return true;
    }

    /// Atomically adds `delta` to the 8-byte little-endian integer value of `key` (absent
    /// counts as 0); returns the new value.
    std::int64_t add(bytes_view key, std::int64_t delta) const {
        std::int64_t v = 0;
        detail::check(shoal_map_add(h_.get(), key.data(), key.size(), delta, &v), "shoal_map_add");
        return v;
    }

    /// Atomic read-modify-write: `f(std::optional<std::string_view> current)` returns the
    /// new value (std::optional<std::string>; nullopt removes the key). `f` may run
    /// several times (if another write comes in between) and must have no side effects.
    /// Returns the value installed.
    template <class F>
    std::optional<std::string> update(bytes_view key, F&& f) const {
        using Fn = std::remove_reference_t<F>;
        struct Ctx {
            Fn* f;
            std::optional<std::string> last;
            std::exception_ptr error;
        } c{&f, std::nullopt, nullptr};
        auto cb = [](void* ctx, const void* cur, std::size_t len, bool present,
                     const void** out, std::size_t* out_len) -> int {
            auto* c = static_cast<Ctx*>(ctx);
            try {
                std::optional<std::string_view> now;
                if (present) now.emplace(static_cast<const char*>(cur), len);
                c->last = (*c->f)(now);
                if (!c->last) return SHOAL_UPDATE_REMOVE;
                *out = c->last->data();
                *out_len = c->last->size();
                return SHOAL_UPDATE_SET;
            } catch (...) {
                c->error = std::current_exception();
                return -1;  // cancels the update
            }
        };
        shoal_status rc = shoal_map_update(h_.get(), key.data(), key.size(), cb, &c);
        if (c.error) std::rethrow_exception(c.error);
        detail::check(rc, "shoal_map_update");
        return std::move(c.last);
    }

    /// The value of `key`, first inserting `default_value` if the key is absent
    /// (atomically: of racing callers, exactly one inserts).
    std::string get_or_insert(bytes_view key, bytes_view default_value) const {
        std::string out(default_value.size(), '\0');
        for (;;) {
            std::size_t len = 0;
            shoal_status rc = shoal_map_get_or_insert(h_.get(), key.data(), key.size(),
                                                      default_value.data(), default_value.size(),
                                                      out.data(), out.size(), &len);
            if (rc == SHOAL_BUFFER_TOO_SMALL) {
                out.resize(len);
                continue;
            }
            detail::check(rc, "shoal_map_get_or_insert");
            out.resize(len);
            return out;
        }
    }

    /// Looks up many keys at once (faster per key on large maps); results in key order.
    std::vector<std::optional<std::string>> get_many(const std::vector<bytes_view>& keys) const {
        std::vector<shoal_bytes> ks(keys.size());
        for (std::size_t i = 0; i < keys.size(); i++) ks[i] = shoal_bytes{keys[i].data(), keys[i].size()};
        struct Ctx {
            std::vector<std::optional<std::string>> out;
            bool failed;
        } c{std::vector<std::optional<std::string>>(keys.size()), false};
        auto cb = [](void* ctx, std::size_t i, const void* v, std::size_t len, bool present) {
            auto* c = static_cast<Ctx*>(ctx);
            if (!present || c->failed) return;
            try {
                c->out[i].emplace(static_cast<const char*>(v), len);
            } catch (...) {
                c->failed = true;  // out of memory: thrown below, not through the C library
            }
        };
        shoal_status rc = shoal_map_get_many(h_.get(), ks.data(), ks.size(), cb, &c);
        if (c.failed) throw std::bad_alloc();
        detail::check(rc, "shoal_map_get_many");
        return std::move(c.out);
    }

    /// Puts many entries (each put atomic on its own; stops at the first error).
    void put_many(const std::vector<std::pair<bytes_view, bytes_view>>& items) const {
        std::vector<shoal_kv> kv(items.size());
        for (std::size_t i = 0; i < items.size(); i++)
            kv[i] = shoal_kv{items[i].first.data(), items[i].first.size(), items[i].second.data(),
                             items[i].second.size()};
        detail::check(shoal_map_put_many(h_.get(), kv.data(), kv.size()), "shoal_map_put_many");
    }

    /// Removes many keys; returns how many were present.
    std::uint64_t remove_many(const std::vector<bytes_view>& keys) const {
        std::vector<shoal_bytes> ks(keys.size());
        for (std::size_t i = 0; i < keys.size(); i++) ks[i] = shoal_bytes{keys[i].data(), keys[i].size()};
        std::uint64_t n = 0;
        detail::check(shoal_map_remove_many(h_.get(), ks.data(), ks.size(), &n),
                      "shoal_map_remove_many");
        return n;
    }

    // ---- stable UIDs (maps created with MapOptions::uids; the calls below throw
    // shoal::Error with SHOAL_INVALID on a map without them, and with SHOAL_STALE_UID
    // for a handle whose key was removed)

    /// Whether the map keeps a Uid per key.
    bool has_uids() const {
        bool b = false;
        detail::check(shoal_map_has_uids(h_.get(), &b), "shoal_map_has_uids");
        return b;
    }

    /// The handle of `key`, or nullopt if the key is absent.
    std::optional<Uid> uid(bytes_view key) const {
        std::uint64_t u = 0;
        shoal_status rc = shoal_map_uid(h_.get(), key.data(), key.size(), &u);
        if (rc == SHOAL_NOT_FOUND) return std::nullopt;
        detail::check(rc, "shoal_map_uid");
        return Uid(u);
    }

    /// The version of `key`'s UID entry (shoal_map_version), or nullopt if the key is
    /// absent: every change to the key moves it (Transaction::when_version).
    std::optional<std::uint64_t> version(bytes_view key) const {
        std::uint64_t v = 0;
        shoal_status rc = shoal_map_version(h_.get(), key.data(), key.size(), &v);
        if (rc == SHOAL_NOT_FOUND) return std::nullopt;
        detail::check(rc, "shoal_map_version");
        return v;
    }

    /// put, returning the key's handle (new for an inserted key, unchanged for a replaced
    /// one); `outcome`, if not null, receives what the put did.
    Uid put_uid(bytes_view key, bytes_view value, PutOutcome* outcome = nullptr) const {
        std::uint64_t u = 0;
        bool replaced = false;
        detail::check(shoal_map_put_uid(h_.get(), key.data(), key.size(), value.data(),
                                        value.size(), &u, &replaced),
                      "shoal_map_put_uid");
        if (outcome) *outcome = replaced ? PutOutcome::Replaced : PutOutcome::Inserted;
        return Uid(u);
    }

    /// The value of the key `uid` names.
    std::string get_by_uid(Uid uid) const {
        std::string out;
        get_by_uid_into(uid, out);
        return out;
    }

    /// Copies the value of the key `uid` names into `out` (reusing its capacity).
    void get_by_uid_into(Uid uid, std::string& out) const {
        if (out.capacity() > out.size()) out.resize(out.capacity());
        for (;;) {
            std::size_t len = 0;
            shoal_status rc =
                shoal_map_get_by_uid(h_.get(), uid.to_u64(), out.data(), out.size(), &len);
            if (rc == SHOAL_OK) {
                out.resize(len);
                return;
            }
            if (rc != SHOAL_BUFFER_TOO_SMALL) detail::raise(rc, "shoal_map_get_by_uid");
            out.resize(len);  // the value may change meanwhile: loop
        }
    }

    /// Calls f(std::string_view value) on the value of the key `uid` names, without a copy.
    template <class F>
    void visit_by_uid(Uid uid, F&& f) const {
        using Fn = std::remove_reference_t<F>;
        detail::Thunk<Fn> t{&f, nullptr};
        auto cb = [](void* ctx, const void* v, std::size_t len) {
            auto* t = static_cast<detail::Thunk<Fn>*>(ctx);
            try {
                (*t->f)(std::string_view(static_cast<const char*>(v), len));
            } catch (...) {
                t->error = std::current_exception();
            }
        };
        shoal_status rc = shoal_map_get_by_uid_cb(h_.get(), uid.to_u64(), cb, &t);
        if (t.error) std::rethrow_exception(t.error);
        detail::check(rc, "shoal_map_get_by_uid_cb");
    }

    /// The key `uid` names.
    std::string key_by_uid(Uid uid) const {
        std::string out(16, '\0');
        for (;;) {
            std::size_t len = 0;
            shoal_status rc =
                shoal_map_key_by_uid(h_.get(), uid.to_u64(), out.data(), out.size(), &len);
            if (rc == SHOAL_OK) {
                out.resize(len);
                return out;
            }
            if (rc != SHOAL_BUFFER_TOO_SMALL) detail::raise(rc, "shoal_map_key_by_uid");
            out.resize(len);
        }
    }

    /// Replaces the value of the key `uid` names.
    void put_by_uid(Uid uid, bytes_view value) const {
        detail::check(shoal_map_put_by_uid(h_.get(), uid.to_u64(), value.data(), value.size()),
                      "shoal_map_put_by_uid");
    }

    /// Removes the key `uid` names and returns its value; the handle becomes stale.
    std::string remove_by_uid(Uid uid) const {
        std::string out;
        auto cb = [](void* ctx, const void* v, std::size_t len) {
            auto* o = static_cast<std::pair<std::string*, bool>*>(ctx);
            try {
                o->first->assign(static_cast<const char*>(v), len);
            } catch (...) {
                o->second = true;
            }
        };
        std::pair<std::string*, bool> ctx{&out, false};
        shoal_status rc = shoal_map_take_by_uid(h_.get(), uid.to_u64(), cb, &ctx);
        if (ctx.second) throw std::bad_alloc();
        detail::check(rc, "shoal_map_take_by_uid");
        return out;
    }

    /// add on the key `uid` names; returns the new value.
    std::int64_t add_by_uid(Uid uid, std::int64_t delta) const {
        std::int64_t v = 0;
        detail::check(shoal_map_add_by_uid(h_.get(), uid.to_u64(), delta, &v),
                      "shoal_map_add_by_uid");
        return v;
    }

    /// update on the key `uid` names: f(std::string_view current) returns
    /// std::optional<std::string> (nullopt removes the key); it may run more than once.
    /// Returns what f returned last (the value now installed).
    template <class F>
    std::optional<std::string> update_by_uid(Uid uid, F&& f) const {
        using Fn = std::remove_reference_t<F>;
        struct Ctx {
            Fn* f;
            std::optional<std::string> last;
            std::exception_ptr error;
        } c{&f, std::nullopt, nullptr};
        auto cb = [](void* ctx, const void* cur, std::size_t len, bool,
                     const void** out, std::size_t* out_len) -> int {
            auto* c = static_cast<Ctx*>(ctx);
            try {
                c->last = (*c->f)(std::string_view(static_cast<const char*>(cur), len));
                if (!c->last) return SHOAL_UPDATE_REMOVE;
                *out = c->last->data();
                *out_len = c->last->size();
                return SHOAL_UPDATE_SET;
            } catch (...) {
                c->error = std::current_exception();
                return -1;  // cancels the update
            }
        };
        shoal_status rc = shoal_map_update_by_uid(h_.get(), uid.to_u64(), cb, &c);
        if (c.error) std::rethrow_exception(c.error);
        detail::check(rc, "shoal_map_update_by_uid");
        return std::move(c.last);
    }

    /// A second handle on this map whose calls wait at most `timeout` for a lock.
    Map with_timeout(std::chrono::milliseconds timeout) const {
        auto ms = timeout.count();
        shoal_map* m = nullptr;
        detail::check(shoal_map_with_timeout(h_.get(),
                                             ms <= 0 ? 0u : ms > 0xffffffffLL ? 0xffffffffU
                                                                               : static_cast<std::uint32_t>(ms),
                                             &m),
                      "shoal_map_with_timeout");
        return Map(m);
    }

    bool contains(bytes_view key) const {
        bool present = false;
        detail::check(shoal_map_contains(h_.get(), key.data(), key.size(), &present),
                      "shoal_map_contains");
        return present;
    }

    /// Number of entries.
    std::uint64_t size() const {
        std::uint64_t n = 0;
        detail::check(shoal_map_len(h_.get(), &n), "shoal_map_len");
        return n;
    }
    bool empty() const { return size() == 0; }

    /// Removes every entry.
    void clear() const { detail::check(shoal_map_clear(h_.get()), "shoal_map_clear"); }

    shoal_map_stats stats() const {
        shoal_map_stats s{};
        s.struct_size = sizeof s;
        detail::check(shoal_map_get_stats(h_.get(), &s), "shoal_map_get_stats");
        return s;
    }

    std::string name() const {
        char buf[SHOAL_MAX_NAME_LEN + 1];
        std::size_t len = 0;
        detail::check(shoal_map_name(h_.get(), buf, sizeof buf, &len), "shoal_map_name");
        return std::string(buf, len);
    }

    /// The key type recorded at creation (code SHOAL_TYPE_NONE: none).
    DataType key_type() const {
        DataType t;
        detail::check(shoal_map_types(h_.get(), &t.code, &t.tag, nullptr, nullptr),
                      "shoal_map_types");
        return t;
    }

    /// The value type recorded at creation.
    DataType value_type() const {
        DataType t;
        detail::check(shoal_map_types(h_.get(), nullptr, nullptr, &t.code, &t.tag),
                      "shoal_map_types");
        return t;
    }

    /// Calls `f(std::string_view key, std::string_view value)` for each entry (views valid
    /// during the call). If f returns bool, false stops the walk.
    template <class F>
    void for_each(F&& f) const {
        using Fn = std::remove_reference_t<F>;
        detail::Thunk<Fn> t{&f, nullptr};
        auto cb = [](void* ctx, const void* k, std::size_t kl, const void* v,
                     std::size_t vl) -> int {
            auto* t = static_cast<detail::Thunk<Fn>*>(ctx);
            try {
                std::string_view ks(static_cast<const char*>(k), kl);
                std::string_view vs(static_cast<const char*>(v), vl);
                if constexpr (std::is_convertible_v<std::invoke_result_t<Fn&, std::string_view,
                                                                         std::string_view>,
                                                    bool>) {
                    return (*t->f)(ks, vs) ? 0 : 1;
                } else {
                    (*t->f)(ks, vs);
                    return 0;
                }
            } catch (...) {
                t->error = std::current_exception();
                return 1;
            }
        };
        shoal_status rc = shoal_map_for_each(h_.get(), cb, &t);
        if (t.error) std::rethrow_exception(t.error);
        detail::check(rc, "shoal_map_for_each");
    }

    /// Range-for over (key, value) pairs, weakly consistent (see shoal_iter_next).
    iterator begin() const;
    sentinel end() const noexcept { return {}; }

    /// The keys only: `for (const std::string& k : map.keys())`.
    class key_range;
    key_range keys() const;

    /// The C handle, for calls this wrapper does not cover. Owned by this object.
    shoal_map* handle() const noexcept { return h_.get(); }

private:
    friend class Store;
    friend class key_range;
    explicit Map(shoal_map* m) noexcept : h_(m) {}
    iterator open_iter(bool keys_only) const;
    struct Close {
        void operator()(shoal_map* m) const noexcept { shoal_map_close(m); }
    };
    std::unique_ptr<shoal_map, Close> h_;
};

/// An input iterator over a map's entries (see Map::begin). Copies share one position.
class Map::iterator {
public:
    using iterator_category = std::input_iterator_tag;
    using value_type = std::pair<std::string, std::string>;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = const value_type&;

    iterator() = default;
    reference operator*() const noexcept { return st_->cur; }
    pointer operator->() const noexcept { return &st_->cur; }
    iterator& operator++() {
        st_->advance();
        return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(sentinel) const noexcept { return !st_ || st_->done; }
    bool operator!=(sentinel s) const noexcept { return !(*this == s); }
    friend bool operator==(sentinel s, const iterator& i) noexcept { return i == s; }
    friend bool operator!=(sentinel s, const iterator& i) noexcept { return i != s; }

private:
    friend class Map;
    struct State {
        struct Close {
            void operator()(shoal_iter* i) const noexcept { shoal_iter_close(i); }
        };
        std::unique_ptr<shoal_iter, Close> it;
        value_type cur;
        bool keys_only = false;
        bool done = false;

        void advance() {
            std::string& k = cur.first;
            std::string& v = cur.second;
            if (k.size() < 64) k.resize(64);
            if (!keys_only && v.size() < 64) v.resize(64);
            for (;;) {
                std::size_t kl = 0, vl = 0;
                shoal_status rc =
                    shoal_iter_next(it.get(), k.data(), k.size(), &kl,
                                    keys_only ? nullptr : v.data(), keys_only ? 0 : v.size(), &vl);
                if (rc == SHOAL_OK) {
                    k.resize(kl);
                    if (!keys_only) v.resize(vl);
                    return;
                }
                if (rc == SHOAL_DONE) {
                    done = true;
                    k.clear();
                    v.clear();
                    return;
                }
                if (rc != SHOAL_BUFFER_TOO_SMALL) {
                    done = true;
                    detail::raise(rc, "shoal_iter_next");
                }
                if (kl > k.size()) k.resize(kl);
                if (!keys_only && vl > v.size()) v.resize(vl);
            }
        }
    };
    explicit iterator(std::shared_ptr<State> st) : st_(std::move(st)) {}
    std::shared_ptr<State> st_;
};

/// The keys of a map (see Map::keys).
class Map::key_range {
public:
    class iterator {
    public:
        using iterator_category = std::input_iterator_tag;
        using value_type = std::string;
        using difference_type = std::ptrdiff_t;
        using pointer = const std::string*;
        using reference = const std::string&;
        reference operator*() const noexcept { return it_->first; }
        pointer operator->() const noexcept { return &it_->first; }
        iterator& operator++() {
            ++it_;
            return *this;
        }
        void operator++(int) { ++it_; }
        bool operator==(sentinel s) const noexcept { return it_ == s; }
        bool operator!=(sentinel s) const noexcept { return it_ != s; }

    private:
        friend class key_range;
        explicit iterator(Map::iterator it) : it_(std::move(it)) {}
        Map::iterator it_;
    };
    iterator begin() const { return iterator(map_->open_iter(true)); }
    sentinel end() const noexcept { return {}; }

private:
    friend class Map;
    explicit key_range(const Map* m) : map_(m) {}
    const Map* map_;
};

/// A fixed-size map (Store::fixed_map): every key is exactly key_size() bytes and every
/// value exactly value_size() bytes; any other length throws shoal::Error with
/// SHOAL_INVALID. Move-only; closes its handle when destroyed (the map stays in the
/// store). Usable from many threads at once. Range-for yields (key, value) pairs.
class FixedMap {
public:
    class iterator;
    struct sentinel {};

    std::size_t key_size() const noexcept { return key_size_; }
    std::size_t value_size() const noexcept { return value_size_; }

    /// The key type recorded at creation (code SHOAL_TYPE_NONE: none).
    DataType key_type() const {
        DataType t;
        detail::check(shoal_fixed_types(h_.get(), &t.code, &t.tag, nullptr, nullptr),
                      "shoal_fixed_types");
        return t;
    }

    /// The value type recorded at creation.
    DataType value_type() const {
        DataType t;
        detail::check(shoal_fixed_types(h_.get(), nullptr, nullptr, &t.code, &t.tag),
                      "shoal_fixed_types");
        return t;
    }

    /// The value of `key`, or nullopt.
    std::optional<std::string> get(bytes_view key) const {
        std::string v(value_size_, '\0');
        if (!get_into(key, v.data(), v.size())) return std::nullopt;
        return v;
    }

    /// Copies the value of `key` into `buf` (exactly value_size() bytes); false if absent.
    bool get_into(bytes_view key, void* buf, std::size_t len) const {
        shoal_status rc = shoal_fixed_get(h_.get(), key.data(), key.size(), buf, len);
        if (rc == SHOAL_NOT_FOUND) return false;
        detail::check(rc, "shoal_fixed_get");
        return true;
    }

    bool contains(bytes_view key) const {
        bool present = false;
        detail::check(shoal_fixed_contains(h_.get(), key.data(), key.size(), &present),
                      "shoal_fixed_contains");
        return present;
    }

    /// Inserts or replaces; says which.
    PutOutcome put(bytes_view key, bytes_view value) const {
        bool replaced = false;
        detail::check(shoal_fixed_put(h_.get(), key.data(), key.size(), value.data(),
                                      value.size(), &replaced),
                      "shoal_fixed_put");
        return replaced ? PutOutcome::Replaced : PutOutcome::Inserted;
    }

    /// Inserts only if absent; false if the key was present (nothing changed).
    bool put_if_absent(bytes_view key, bytes_view value) const {
        shoal_status rc = shoal_fixed_put_if_absent(h_.get(), key.data(), key.size(),
                                                     value.data(), value.size());
        if (rc == SHOAL_EXISTS) return false;
        detail::check(rc, "shoal_fixed_put_if_absent");
        return true;
    }

    /// Replaces only if present; false if the key was absent (nothing changed).
    bool put_if_present(bytes_view key, bytes_view value) const {
        shoal_status rc = shoal_fixed_put_if_present(h_.get(), key.data(), key.size(),
                                                      value.data(), value.size());
        if (rc == SHOAL_NOT_FOUND) return false;
        detail::check(rc, "shoal_fixed_put_if_present");
        return true;
    }

    /// The former name of `put_if_absent` (stays for one release).
    [[deprecated("renamed put_if_absent")]] bool insert(bytes_view key, bytes_view value) const {
        return put_if_absent(key, value);
    }

    /// The former name of `put_if_present` (stays for one release).
    [[deprecated("renamed put_if_present")]] bool replace(bytes_view key,
                                                          bytes_view value) const {
        return put_if_present(key, value);
    }

    /// Removes `key`; false if it was absent.
    bool remove(bytes_view key) const {
        shoal_status rc = shoal_fixed_remove(h_.get(), key.data(), key.size());
        if (rc == SHOAL_NOT_FOUND) return false;
        detail::check(rc, "shoal_fixed_remove");
        return true;
    }

    /// Inserts or replaces, returning the previous value (nullopt if the key was absent).
    std::optional<std::string> swap(bytes_view key, bytes_view value) const {
        std::string old(value_size_, '\0');
        bool replaced = false;
        detail::check(shoal_fixed_swap(h_.get(), key.data(), key.size(), value.data(),
                                       value.size(), old.data(), old.size(), &replaced),
                      "shoal_fixed_swap");
        if (!replaced) return std::nullopt;
        return old;
    }

    /// Removes `key` and returns its value (nullopt if it was absent).
    std::optional<std::string> take(bytes_view key) const {
        std::string old(value_size_, '\0');
        shoal_status rc =
            shoal_fixed_take(h_.get(), key.data(), key.size(), old.data(), old.size());
        if (rc == SHOAL_NOT_FOUND) return std::nullopt;
        detail::check(rc, "shoal_fixed_take");
        return old;
    }

    /// The value of `key`, first inserting `default_value` if the key is absent
    /// (atomically: of several racing callers, exactly one inserts).
    std::string get_or_insert(bytes_view key, bytes_view default_value) const {
        std::string v(value_size_, '\0');
        detail::check(shoal_fixed_get_or_insert(h_.get(), key.data(), key.size(),
                                                default_value.data(), default_value.size(),
                                                v.data(), v.size()),
                      "shoal_fixed_get_or_insert");
        return v;
    }

    /// Atomically: if the value of `key` is `expected` (nullopt: absent), sets it to
    /// `desired` (nullopt: removes it). False if it did not match (nothing changed).
    bool compare_and_swap(bytes_view key, std::optional<bytes_view> expected,
                          std::optional<bytes_view> desired) const {
        std::uint32_t flags = (expected ? 0u : SHOAL_CAS_EXPECT_ABSENT) |
                              (desired ? 0u : SHOAL_CAS_REMOVE);
        bytes_view e = expected.value_or(bytes_view()), d = desired.value_or(bytes_view());
        shoal_status rc = shoal_fixed_compare_and_swap(h_.get(), key.data(), key.size(),
                                                       e.data(), e.size(), d.data(), d.size(),
                                                       flags);
        if (rc == SHOAL_MISMATCH) return false;
        detail::check(rc, "shoal_fixed_compare_and_swap");
        return true;
    }

    /// Atomically adds `delta` to the 8-byte little-endian integer value of `key` (absent
    /// counts as 0); returns the new value. Lock-free on a present key.
    std::int64_t add(bytes_view key, std::int64_t delta) const {
        std::int64_t v = 0;
        detail::check(shoal_fixed_add(h_.get(), key.data(), key.size(), delta, &v),
                      "shoal_fixed_add");
        return v;
    }

    /// Atomic read-modify-write: `f(std::optional<std::string_view> current)` returns the
    /// new value (std::optional<std::string> of exactly value_size() bytes; nullopt
    /// removes the key). `f` may run several times (if another write comes in between)
    /// and must have no side effects. Returns the value installed. A new value of another
    /// size throws shoal::Error (SHOAL_INVALID) and changes nothing; an exception thrown
    /// by `f` cancels the update and is rethrown.
    template <class F>
    std::optional<std::string> update(bytes_view key, F&& f) const {
        using Fn = std::remove_reference_t<F>;
        struct Ctx {
            Fn* f;
            std::optional<std::string> last;
            std::exception_ptr error;
        } c{&f, std::nullopt, nullptr};
        auto cb = [](void* ctx, const void* cur, std::size_t len, bool present,
                     const void** out, std::size_t* out_len) -> int {
            auto* c = static_cast<Ctx*>(ctx);
            try {
                std::optional<std::string_view> now;
                if (present) now.emplace(static_cast<const char*>(cur), len);
                c->last = (*c->f)(now);
                if (!c->last) return SHOAL_UPDATE_REMOVE;
                *out = c->last->data();
                *out_len = c->last->size();
                return SHOAL_UPDATE_SET;
            } catch (...) {
                c->error = std::current_exception();
                return -1;  // cancels the update
            }
        };
        shoal_status rc = shoal_fixed_update(h_.get(), key.data(), key.size(), cb, &c);
        if (c.error) std::rethrow_exception(c.error);
        detail::check(rc, "shoal_fixed_update");
        return std::move(c.last);
    }

    /// Looks up many keys at once (their memory misses overlap); results in key order.
    /// Every key must be key_size() bytes (else shoal::Error, SHOAL_INVALID).
    std::vector<std::optional<std::string>> get_many(const std::vector<bytes_view>& keys) const {
        std::vector<shoal_bytes> ks(keys.size());
        for (std::size_t i = 0; i < keys.size(); i++) ks[i] = shoal_bytes{keys[i].data(), keys[i].size()};
        struct Ctx {
            std::vector<std::optional<std::string>> out;
            bool failed;
        } c{std::vector<std::optional<std::string>>(keys.size()), false};
        auto cb = [](void* ctx, std::size_t i, const void* v, std::size_t len, bool present) {
            auto* c = static_cast<Ctx*>(ctx);
            if (!present || c->failed) return;
            try {
                c->out[i].emplace(static_cast<const char*>(v), len);
            } catch (...) {
                c->failed = true;  // out of memory: thrown below, not through the C library
            }
        };
        detail::check(shoal_fixed_get_many(h_.get(), ks.data(), ks.size(), cb, &c),
                      "shoal_fixed_get_many");
        if (c.failed) throw std::bad_alloc();
        return std::move(c.out);
    }

    /// Puts many entries (each put atomic on its own, the batch not). Sizes and null
    /// pointers are checked before anything is written; otherwise stops at the first
    /// error, earlier entries staying written.
    void put_many(const std::vector<std::pair<bytes_view, bytes_view>>& items) const {
        std::vector<shoal_kv> kv(items.size());
        for (std::size_t i = 0; i < items.size(); i++)
            kv[i] = shoal_kv{items[i].first.data(), items[i].first.size(), items[i].second.data(),
                             items[i].second.size()};
        detail::check(shoal_fixed_put_many(h_.get(), kv.data(), kv.size()),
                      "shoal_fixed_put_many");
    }

    /// Removes many keys (each removal atomic on its own); returns how many were present.
    std::uint64_t remove_many(const std::vector<bytes_view>& keys) const {
        std::vector<shoal_bytes> ks(keys.size());
        for (std::size_t i = 0; i < keys.size(); i++) ks[i] = shoal_bytes{keys[i].data(), keys[i].size()};
        std::uint64_t n = 0;
        detail::check(shoal_fixed_remove_many(h_.get(), ks.data(), ks.size(), &n),
                      "shoal_fixed_remove_many");
        return n;
    }

    /// A second handle on this map whose calls wait at most `timeout` for a lock.
    FixedMap with_timeout(std::chrono::milliseconds timeout) const {
        auto ms = timeout.count();
        shoal_fixed* f = nullptr;
        detail::check(shoal_fixed_with_timeout(h_.get(),
                                               ms <= 0 ? 0u : ms > 0xffffffffLL ? 0xffffffffU
                                                                                 : static_cast<std::uint32_t>(ms),
                                               &f),
                      "shoal_fixed_with_timeout");
        return FixedMap(f);
    }

    /// Number of entries.
    std::uint64_t size() const {
        std::uint64_t n = 0;
        detail::check(shoal_fixed_len(h_.get(), &n), "shoal_fixed_len");
        return n;
    }
    bool empty() const { return size() == 0; }

    /// Removes every entry.
    void clear() const { detail::check(shoal_fixed_clear(h_.get()), "shoal_fixed_clear"); }

    shoal_fixed_stats stats() const {
        shoal_fixed_stats s{};
        s.struct_size = sizeof s;
        detail::check(shoal_fixed_get_stats(h_.get(), &s), "shoal_fixed_get_stats");
        return s;
    }

    /// Range-for over (key, value) pairs, weakly consistent (see shoal_fixed_iter_next).
    iterator begin() const;
    sentinel end() const noexcept { return {}; }

    /// The C handle, for calls this wrapper does not cover. Owned by this object.
    shoal_fixed* handle() const noexcept { return h_.get(); }

private:
    friend class Store;
    explicit FixedMap(shoal_fixed* f) : h_(f) {
        detail::check(shoal_fixed_sizes(f, &key_size_, &value_size_), "shoal_fixed_sizes");
    }
    struct Close {
        void operator()(shoal_fixed* f) const noexcept { shoal_fixed_close(f); }
    };
    std::unique_ptr<shoal_fixed, Close> h_;
    std::size_t key_size_ = 0;
    std::size_t value_size_ = 0;
};

/// An input iterator over a fixed map's entries (see FixedMap::begin). Copies share one
/// position.
class FixedMap::iterator {
public:
    using iterator_category = std::input_iterator_tag;
    using value_type = std::pair<std::string, std::string>;
    using difference_type = std::ptrdiff_t;
    using pointer = const value_type*;
    using reference = const value_type&;

    iterator() = default;
    reference operator*() const noexcept { return st_->cur; }
    pointer operator->() const noexcept { return &st_->cur; }
    iterator& operator++() {
        st_->advance();
        return *this;
    }
    void operator++(int) { ++*this; }
    bool operator==(sentinel) const noexcept { return !st_ || st_->done; }
    bool operator!=(sentinel s) const noexcept { return !(*this == s); }
    friend bool operator==(sentinel s, const iterator& i) noexcept { return i == s; }
    friend bool operator!=(sentinel s, const iterator& i) noexcept { return i != s; }

private:
    friend class FixedMap;
    struct State {
        struct Close {
            void operator()(shoal_fixed_iter* i) const noexcept { shoal_fixed_iter_close(i); }
        };
        std::unique_ptr<shoal_fixed_iter, Close> it;
        value_type cur;
        bool done = false;

        void advance() {
            shoal_status rc = shoal_fixed_iter_next(it.get(), cur.first.data(), cur.first.size(),
                                                    cur.second.data(), cur.second.size());
            if (rc == SHOAL_OK) return;
            done = true;
            if (rc != SHOAL_DONE) detail::raise(rc, "shoal_fixed_iter_next");
        }
    };
    explicit iterator(std::shared_ptr<State> st) : st_(std::move(st)) {}
    std::shared_ptr<State> st_;
};

// Out-of-class definitions (they need the complete nested types).

inline Map Store::map(std::string_view name, bool create, const MapOptions& opts) const {
    std::string n(name);
    shoal_map_options o{};
    o.struct_size = sizeof o;
    o.segment_buckets = opts.segment_buckets;
    o.stash_buckets = opts.stash_buckets;
    o.uids = opts.uids ? 1u : 0u;
    o.key_type = opts.key_type.code;
    o.key_tag = opts.key_type.tag;
    o.value_type = opts.value_type.code;
    o.value_tag = opts.value_type.tag;
    shoal_map* m = nullptr;
    detail::check(shoal_map_open(h_.get(), n.c_str(), create ? SHOAL_MAP_CREATE : 0, &o, &m),
                  "shoal_map_open");
    return Map(m);
}

inline Map::iterator Map::open_iter(bool keys_only) const {
    auto st = std::make_shared<iterator::State>();
    st->keys_only = keys_only;
    shoal_iter* it = nullptr;
    detail::check(shoal_iter_open(h_.get(), keys_only ? SHOAL_ITER_KEYS_ONLY : 0, &it),
                  "shoal_iter_open");
    st->it.reset(it);
    st->advance();
    return iterator(std::move(st));
}

inline Map::iterator Map::begin() const { return open_iter(false); }

inline Map::key_range Map::keys() const { return key_range(this); }

inline FixedMap Store::fixed_map(std::string_view name, std::size_t key_size,
                                 std::size_t value_size, bool create,
                                 const FixedOptions& opts) const {
    std::string n(name);
    shoal_fixed_options o{};
    o.struct_size = sizeof o;
    o.segment_buckets = opts.segment_buckets;
    o.stash_buckets = opts.stash_buckets;
    o.key_type = opts.key_type.code;
    o.key_tag = opts.key_type.tag;
    o.value_type = opts.value_type.code;
    o.value_tag = opts.value_type.tag;
    shoal_fixed* f = nullptr;
    detail::check(shoal_fixed_open_with(h_.get(), n.c_str(), key_size, value_size,
                                        create ? SHOAL_MAP_CREATE : 0, &o, &f),
                  "shoal_fixed_open_with");
    return FixedMap(f);
}

inline FixedMap::iterator FixedMap::begin() const {
    auto st = std::make_shared<iterator::State>();
    st->cur.first.resize(key_size_);
    st->cur.second.resize(value_size_);
    shoal_fixed_iter* it = nullptr;
    detail::check(shoal_fixed_iter_open(h_.get(), &it), "shoal_fixed_iter_open");
    st->it.reset(it);
    st->advance();
    return iterator(std::move(st));
}


/// How an integer condition compares a key's 8-byte little-endian value with its operand.
enum class IntCmp : std::uint32_t {
    Eq = SHOAL_CMP_EQ,
    Ne = SHOAL_CMP_NE,
    Lt = SHOAL_CMP_LT,
    Le = SHOAL_CMP_LE,
    Gt = SHOAL_CMP_GT,
    Ge = SHOAL_CMP_GE,
};

/// A map a Transaction or Store::snapshot_get names: a FixedMap or a (variable-size) Map,
/// converted implicitly from a reference or a pointer. It does not own the map, which
/// must outlive its use.
class TxnMapRef {
public:
    /// A fixed-size map.
    TxnMapRef(const FixedMap& m) noexcept;  // NOLINT(google-explicit-constructor)
    /// A fixed-size map (nullptr: the call fails with SHOAL_NULL_POINTER).
    TxnMapRef(const FixedMap* m) noexcept;  // NOLINT(google-explicit-constructor)
    /// A variable-size map.
    TxnMapRef(const Map& m) noexcept;  // NOLINT(google-explicit-constructor)
    /// A variable-size map (nullptr: the call fails with SHOAL_NULL_POINTER).
    TxnMapRef(const Map* m) noexcept;  // NOLINT(google-explicit-constructor)

    /// The fixed-size map's handle, or nullptr.
    shoal_fixed* fixed() const noexcept { return fixed_; }
    /// The variable-size map's handle, or nullptr.
    shoal_map* var() const noexcept { return var_; }
    /// A fixed map's value size; 0 for a variable map.
    std::size_t value_size() const noexcept { return value_size_; }

private:
    shoal_fixed* fixed_ = nullptr;
    shoal_map* var_ = nullptr;
    std::size_t value_size_ = 0;
};

inline TxnMapRef::TxnMapRef(const FixedMap& m) noexcept
    : fixed_(m.handle()), value_size_(m.value_size()) {}
inline TxnMapRef::TxnMapRef(const FixedMap* m) noexcept
    : fixed_(m ? m->handle() : nullptr), value_size_(m ? m->value_size() : 0) {}
inline TxnMapRef::TxnMapRef(const Map& m) noexcept : var_(m.handle()) {}
inline TxnMapRef::TxnMapRef(const Map* m) noexcept : var_(m ? m->handle() : nullptr) {}

/// What one operation of the list that ran did (Transaction::commit).
struct TxnResult {
    /// Whether it changed the map (false for a get, a put_if_absent of a present key, a
    /// put_if_present or remove of an absent one).
    bool applied = false;
    /// The key's value before the transaction (nullopt: absent, or old_too_long).
    std::optional<std::string> old;
    /// True when the key was present but its old value (of a variable-size map) was
    /// longer than Transaction::old_capacity, so `old` is not returned: the transaction
    /// committed all the same; read the key again if its old value is needed.
    bool old_too_long = false;
};

/// What a committed transaction did.
struct TxnOutcome {
    /// Whether every condition held (the then-list ran) or not (the else-list ran).
    bool succeeded = false;
    /// One result per operation of the list that ran, in order.
    std::vector<TxnResult> results;
};

/// A multi-key transaction on hash maps of one store, FixedMap and Map mixed freely
/// (shoal_txn_commit): conditions,
/// a then-list and an else-list of operations, committed as one atomic step that no
/// reader, writer or crash sees in part. Keys and values are copied in; the maps must
/// outlive the commit. Limits and errors are shoal_txn_commit's (a transaction too large
/// throws shoal::Error with SHOAL_INVALID and changes nothing).
class Transaction {
public:
    explicit Transaction(const Store& store) : store_(&store) {}

    /// Holds when `key` is present in `m`.
    Transaction& when_present(TxnMapRef m, bytes_view key) {
        return cond(m, key, SHOAL_TXN_PRESENT, 0, {}, 0);
    }
    /// Holds when `key` is absent from `m`.
    Transaction& when_absent(TxnMapRef m, bytes_view key) {
        return cond(m, key, SHOAL_TXN_ABSENT, 0, {}, 0);
    }
    /// Holds when `key` is present with exactly `value`.
    Transaction& when_equals(TxnMapRef m, bytes_view key, bytes_view value) {
        return cond(m, key, SHOAL_TXN_EQUALS, 0, value, 0);
    }
    /// Holds when `key`'s 8-byte little-endian value compares with `operand` as `cmp`
    /// says (an absent key fails it).
    Transaction& when_int(TxnMapRef m, bytes_view key, IntCmp cmp, std::int64_t operand) {
        return cond(m, key, SHOAL_TXN_INT, static_cast<std::uint32_t>(cmp), {}, operand);
    }

    /// Holds when `key` (in a Map with UIDs) is present and its UID entry's version is
    /// `version` (Map::version reads it; every change to the key moves it).
    Transaction& when_version(TxnMapRef m, bytes_view key, std::uint64_t version) {
        conds_.push_back(item(m, key, SHOAL_TXN_VERSION, 0, {}, 0));
        conds_.back().version = version;
        return *this;
    }
    /// The buffer each operation on a variable-size map gets for its old value (default
    /// 4096 bytes): a longer old value is not returned (TxnResult::old_too_long).
    Transaction& old_capacity(std::size_t bytes) {
        old_capacity_ = bytes;
        return *this;
    }

    /// Then-list: reads `key` (its value is the result's `old`).
    Transaction& then_get(TxnMapRef m, bytes_view key) { return op(then_, m, key, SHOAL_TXN_GET, {}, 0); }
    /// Then-list: inserts `key` or replaces its value.
    Transaction& then_put(TxnMapRef m, bytes_view key, bytes_view value) {
        return op(then_, m, key, SHOAL_TXN_PUT, value, 0);
    }
    /// Then-list: inserts `key` if absent.
    Transaction& then_put_if_absent(TxnMapRef m, bytes_view key, bytes_view value) {
        return op(then_, m, key, SHOAL_TXN_PUT_IF_ABSENT, value, 0);
    }
    /// Then-list: replaces `key`'s value if present.
    Transaction& then_put_if_present(TxnMapRef m, bytes_view key, bytes_view value) {
        return op(then_, m, key, SHOAL_TXN_PUT_IF_PRESENT, value, 0);
    }
    /// Then-list: removes `key` if present.
    Transaction& then_remove(TxnMapRef m, bytes_view key) {
        return op(then_, m, key, SHOAL_TXN_REMOVE, {}, 0);
    }
    /// Then-list: adds `delta` to `key`'s 8-byte integer value (absent counts as 0).
    Transaction& then_add(TxnMapRef m, bytes_view key, std::int64_t delta) {
        return op(then_, m, key, SHOAL_TXN_ADD, {}, delta);
    }
    /// Else-list: reads `key`.
    Transaction& else_get(TxnMapRef m, bytes_view key) { return op(else_, m, key, SHOAL_TXN_GET, {}, 0); }
    /// Else-list: inserts `key` or replaces its value.
    Transaction& else_put(TxnMapRef m, bytes_view key, bytes_view value) {
        return op(else_, m, key, SHOAL_TXN_PUT, value, 0);
    }
    /// Else-list: inserts `key` if absent.
    Transaction& else_put_if_absent(TxnMapRef m, bytes_view key, bytes_view value) {
        return op(else_, m, key, SHOAL_TXN_PUT_IF_ABSENT, value, 0);
    }
    /// Else-list: replaces `key`'s value if present.
    Transaction& else_put_if_present(TxnMapRef m, bytes_view key, bytes_view value) {
        return op(else_, m, key, SHOAL_TXN_PUT_IF_PRESENT, value, 0);
    }
    /// Else-list: removes `key` if present.
    Transaction& else_remove(TxnMapRef m, bytes_view key) {
        return op(else_, m, key, SHOAL_TXN_REMOVE, {}, 0);
    }
    /// Else-list: adds `delta` to `key`'s 8-byte integer value (absent counts as 0).
    Transaction& else_add(TxnMapRef m, bytes_view key, std::int64_t delta) {
        return op(else_, m, key, SHOAL_TXN_ADD, {}, delta);
    }

    /// Evaluates the conditions and applies the list they choose, as one atomic step.
    /// Throws shoal::Error (SHOAL_INVALID for bad arguments or a transaction too large).
    TxnOutcome commit() {
        std::vector<shoal_txn_cond> cs(conds_.size());
        for (std::size_t i = 0; i < conds_.size(); i++) {
            const Item& c = conds_[i];
            cs[i] = shoal_txn_cond{c.map.fixed(), c.map.var(), c.key.data(), c.key.size(),
                                   c.kind, c.cmp, c.has_value ? c.value.data() : nullptr,
                                   c.value.size(), c.n, c.version};
        }
        // Each operation's `old` buffer: a fixed map's value size or old_capacity_,
        // filled for the list that ran.
        std::vector<std::string> olds_then, olds_else;
        std::vector<shoal_txn_op> t = ops(then_, olds_then, old_capacity_),
                                  e = ops(else_, olds_else, old_capacity_);
        bool ok = false;
        shoal_status rc = shoal_txn_commit(store_->handle(), cs.data(), cs.size(), t.data(),
                                           t.size(), e.data(), e.size(), &ok);
        // Too small an old buffer is reported after the commit: the results stand.
        if (rc != SHOAL_BUFFER_TOO_SMALL) detail::check(rc, "shoal_txn_commit");
        TxnOutcome out;
        out.succeeded = ok;
        std::vector<shoal_txn_op>& ran = ok ? t : e;
        std::vector<std::string>& olds = ok ? olds_then : olds_else;
        out.results.resize(ran.size());
        for (std::size_t i = 0; i < ran.size(); i++) {
            out.results[i].applied = ran[i].applied != 0;
            if (!ran[i].old_present) continue;
            if (ran[i].old_len > olds[i].size()) {
                out.results[i].old_too_long = true;
                continue;
            }
            olds[i].resize(ran[i].old_len);
            out.results[i].old = std::move(olds[i]);
        }
        return out;
    }

private:
    struct Item {
        TxnMapRef map;
        std::string key;
        std::uint32_t kind;
        std::uint32_t cmp;
        bool has_value;
        std::string value;
        std::int64_t n;
        std::uint64_t version;
    };
    static Item item(TxnMapRef m, bytes_view key, std::uint32_t kind, std::uint32_t cmp,
                     bytes_view value, std::int64_t n) {
        return Item{m,   std::string(key.str()),   kind, cmp, value.data() != nullptr,
                    std::string(value.str()), n,   0};
    }
    Transaction& cond(TxnMapRef m, bytes_view key, std::uint32_t kind, std::uint32_t cmp,
                      bytes_view value, std::int64_t n) {
        conds_.push_back(item(m, key, kind, cmp, value, n));
        return *this;
    }
    Transaction& op(std::vector<Item>& list, TxnMapRef m, bytes_view key,
                    std::uint32_t kind, bytes_view value, std::int64_t n) {
        list.push_back(item(m, key, kind, 0, value, n));
        return *this;
    }
    static std::vector<shoal_txn_op> ops(std::vector<Item>& list, std::vector<std::string>& olds,
                                         std::size_t var_cap) {
        std::vector<shoal_txn_op> out(list.size());
        olds.resize(list.size());
        for (std::size_t i = 0; i < list.size(); i++) {
            Item& o = list[i];
            olds[i].assign(o.map.fixed() ? o.map.value_size() : var_cap, '\0');
            shoal_txn_op x{};
            x.map = o.map.fixed();
            x.vmap = o.map.var();
            x.key = o.key.data();
            x.key_len = o.key.size();
            x.kind = o.kind;
            x.value = o.has_value ? o.value.data() : nullptr;
            x.value_len = o.value.size();
            x.delta = o.n;
            x.old = olds[i].empty() ? nullptr : olds[i].data();
            x.old_cap = olds[i].size();
            out[i] = x;
        }
        return out;
    }

    const Store* store_;
    std::size_t old_capacity_ = 4096;
    std::vector<Item> conds_, then_, else_;
};

inline Transaction Store::transaction() const { return Transaction(*this); }

inline std::vector<std::optional<std::string>> Store::snapshot_get(
    const std::vector<std::pair<TxnMapRef, bytes_view>>& keys) const {
    std::vector<const shoal_fixed*> ms(keys.size());
    std::vector<const shoal_map*> vs(keys.size());
    std::vector<shoal_bytes> ks(keys.size());
    for (std::size_t i = 0; i < keys.size(); i++) {
        ms[i] = keys[i].first.fixed();
        vs[i] = keys[i].first.var();
        ks[i] = shoal_bytes{keys[i].second.data(), keys[i].second.size()};
    }
    struct Ctx {
        std::vector<std::optional<std::string>> out;
        bool failed;
    } c{std::vector<std::optional<std::string>>(keys.size()), false};
    auto cb = [](void* ctx, std::size_t i, const void* v, std::size_t len, bool present) {
        auto* c = static_cast<Ctx*>(ctx);
        if (!present || c->failed) return;
        try {
            c->out[i].emplace(static_cast<const char*>(v), len);
        } catch (...) {
            c->failed = true;  // out of memory: thrown below, not through the C library
        }
    };
    detail::check(shoal_snapshot_get(h_.get(), ms.data(), vs.data(), ks.data(), ks.size(), cb, &c),
                  "shoal_snapshot_get");
    if (c.failed) throw std::bad_alloc();
    return std::move(c.out);
}


class QueueSet;

/// An element of a QueueSet that this process holds: its bytes in place (data(), size(),
/// no copy), until it is pushed (QueueSet::push) or released. Move-only; the destructor
/// gives a still-held element back to the queue it came from (errors then cannot be
/// reported: the element stays held until the process ends), keep() leaves it held.
class Element {
public:
    Element(Element&& o) noexcept : set_(o.set_), e_(o.e_) { o.set_ = nullptr; }
    Element& operator=(Element&& o) noexcept {
        if (this != &o) {
            reset();
            set_ = o.set_;
            e_ = o.e_;
            o.set_ = nullptr;
        }
        return *this;
    }
    Element(const Element&) = delete;
    Element& operator=(const Element&) = delete;
    ~Element() { reset(); }

    /// The element's bytes in this process (64-byte aligned).
    std::uint8_t* data() const noexcept { return e_.data; }
    /// The element's size in bytes.
    std::size_t size() const noexcept { return e_.len; }
    /// The element's index in its set: the same in every process.
    std::uint64_t index() const noexcept { return e_.index; }
    /// The queue it was pulled from.
    std::uint32_t from() const noexcept { return e_.from; }
    /// Whether it is back in its queue because a process died holding it.
    bool redelivered() const noexcept { return e_.redelivered != 0; }
    /// Leaves it held by this process (until the process ends); returns what names it.
    shoal_element keep() noexcept {
        set_ = nullptr;
        return e_;
    }
    /// Gives it back to the queue it came from now. Throws shoal::Error.
    void release() {
        const shoal_queue* s = set_;
        set_ = nullptr;
        if (s) detail::check(shoal_queue_release(s, &e_), "shoal_queue_release");
    }

private:
    friend class QueueSet;
    Element(const shoal_queue* s, shoal_element e) noexcept : set_(s), e_(e) {}
    void reset() noexcept {
        if (set_) shoal_queue_release(set_, &e_);
        set_ = nullptr;
    }
    const shoal_queue* set_;
    shoal_element e_;
};

/// How a new queue set is made (QueueSet::open): its element size and count, its queues
/// (beside `free`) with their depth limits (0: none), the queue every element starts in,
/// and whether a dead holder's elements go back to the queue they came from.
struct QueueOptions {
    std::size_t element_size = 0;
    std::uint64_t elements = 0;
    std::vector<std::pair<std::string, std::uint64_t>> queues;
    std::string initial = "free";
    bool redeliver = false;
};

/// A queue set (shoal_queue_open): named queues passing fixed-size elements between
/// processes by reference. Move-only; closes its handle when destroyed. Usable from many
/// threads at once; Elements it hands out must not outlive it.
class QueueSet {
public:
    /// Opens the queue set `name`, creating it with `opts` if it does not exist (an
    /// existing set keeps its own geometry). Throws shoal::Error.
    QueueSet(const Store& store, const std::string& name, const QueueOptions& opts) {
        std::vector<const char*> names;
        std::vector<std::uint64_t> limits;
        for (const auto& q : opts.queues) {
            names.push_back(q.first.c_str());
            limits.push_back(q.second);
        }
        shoal_queue_options o{};
        o.struct_size = sizeof o;
        o.element_size = opts.element_size;
        o.elements = opts.elements;
        o.queues = names.data();
        o.n_queues = names.size();
        o.limits = limits.data();
        o.initial = opts.initial.c_str();
        o.redeliver = opts.redeliver ? 1 : 0;
        shoal_queue* q = nullptr;
        detail::check(shoal_queue_open(store.handle(), name.c_str(), &o, &q), "shoal_queue_open");
        h_.reset(q);
    }

    /// Opens the existing queue set `name`. Throws shoal::Error (SHOAL_NOT_FOUND).
    QueueSet(const Store& store, const std::string& name) {
        shoal_queue* q = nullptr;
        detail::check(shoal_queue_open(store.handle(), name.c_str(), nullptr, &q),
                      "shoal_queue_open");
        h_.reset(q);
    }

    /// The index of the queue `name`. Throws shoal::Error (SHOAL_NOT_FOUND).
    std::uint32_t queue(const std::string& name) const {
        std::uint32_t q = 0;
        detail::check(shoal_queue_index(h_.get(), name.c_str(), &q), "shoal_queue_index");
        return q;
    }

    /// The element at the head of `q`, waiting up to `timeout` for a push if it is empty
    /// (zero: not at all); nullopt if none came.
    std::optional<Element> pull(std::uint32_t q,
                                std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) const {
        shoal_element e{};
        shoal_status rc = shoal_queue_pull(h_.get(), q, static_cast<std::uint64_t>(timeout.count()), &e);
        if (rc == SHOAL_EMPTY) return std::nullopt;
        detail::check(rc, "shoal_queue_pull");
        return Element(h_.get(), e);
    }

    /// Up to `max` elements from the head of `q`, in one step.
    std::vector<Element> pull_many(std::uint32_t q, std::size_t max) const {
        std::vector<shoal_element> buf(max);
        std::size_t got = 0;
        detail::check(shoal_queue_pull_many(h_.get(), q, buf.data(), max, &got),
                      "shoal_queue_pull_many");
        std::vector<Element> out;
        out.reserve(got);
        for (std::size_t i = 0; i < got; i++) out.push_back(Element(h_.get(), buf[i]));
        return out;
    }

    /// Puts `e` at the tail of `q`. On failure (SHOAL_QUEUE_FULL at a depth limit) it
    /// throws and `e` is still held, by `e`.
    void push(std::uint32_t q, Element& e) {
        detail::check(shoal_queue_push(h_.get(), q, &e.e_), "shoal_queue_push");
        e.set_ = nullptr;
    }
    /// As push(q, e), taking the element.
    void push(std::uint32_t q, Element&& e) { push(q, e); }

    /// Puts every element of `elems` at the tail of `q`, in order, in one step: all or
    /// (throwing) none.
    void push_many(std::uint32_t q, std::vector<Element>& elems) {
        std::vector<shoal_element> buf;
        buf.reserve(elems.size());
        for (const auto& e : elems) buf.push_back(e.e_);
        detail::check(shoal_queue_push_many(h_.get(), q, buf.data(), buf.size()),
                      "shoal_queue_push_many");
        for (auto& e : elems) e.set_ = nullptr;
        elems.clear();
    }

    /// Moves up to `max` elements from the head of `from` to the tail of `to`; how many.
    std::size_t move(std::uint32_t from, std::uint32_t to, std::size_t max) {
        std::size_t n = 0;
        detail::check(shoal_queue_move(h_.get(), from, to, max, &n), "shoal_queue_move");
        return n;
    }

    /// Elements in `q` now.
    std::uint64_t size(std::uint32_t q) const {
        std::uint64_t n = 0;
        detail::check(shoal_queue_len(h_.get(), q, &n), "shoal_queue_len");
        return n;
    }

    /// Hands back the elements of processes that died holding them; how many went back.
    std::uint64_t reclaim() {
        std::uint64_t n = 0;
        detail::check(shoal_queue_reclaim(h_.get(), &n), "shoal_queue_reclaim");
        return n;
    }

    /// The C handle, for calls this wrapper does not cover. Owned by this object.
    shoal_queue* handle() const noexcept { return h_.get(); }

private:
    struct Close {
        void operator()(shoal_queue* q) const noexcept { shoal_queue_close(q); }
    };
    std::unique_ptr<shoal_queue, Close> h_;
};

// ---------------------------------------------------------------------------------------
// Ordered maps: keys in bytewise order, snapshots, range iteration, write transactions.

/// A bound of a range: a key, or nullopt for none. Ranges run from `lo` (included) to
/// `hi` (excluded).
using Bound = std::optional<bytes_view>;

namespace detail {
inline const shoal_bytes* bound_ptr(const Bound& b, shoal_bytes& tmp) noexcept {
    if (!b) return nullptr;
    tmp.data = b->data();
    tmp.len = b->size();
    return &tmp;
}

/// Reads a value through a C call with the needed-length protocol; false if absent.
template <class Call>
bool read_value(Call&& call, std::string& out, const char* name) {
    if (out.capacity() > out.size()) out.resize(out.capacity());
    for (;;) {
        std::size_t len = 0;
        shoal_status rc = call(out.data(), out.size(), &len);
        if (rc == SHOAL_OK) {
            out.resize(len);
            return true;
        }
        if (rc == SHOAL_NOT_FOUND) {
            out.clear();
            return false;
        }
        if (rc != SHOAL_BUFFER_TOO_SMALL) raise(rc, name);
        out.resize(len);
    }
}
}  // namespace detail

/// An iteration over a range of an ordered map's snapshot, for range-for:
/// `for (auto [k, v] : map.range("a", "m")) ...`. Each entry is a pair of string_views
/// valid until the iterator moves on (copy them to keep them). Move-only; bound to the
/// thread that made it.
class OrderedRange {
public:
    using value_type = std::pair<std::string_view, std::string_view>;
    struct sentinel {};

    /// An input iterator over the range (all iterators of one range share its position).
    class iterator {
    public:
        using iterator_category = std::input_iterator_tag;
        using value_type = OrderedRange::value_type;
        using difference_type = std::ptrdiff_t;
        using pointer = const value_type*;
        using reference = const value_type&;

        iterator() = default;
        reference operator*() const noexcept { return r_->cur_; }
        pointer operator->() const noexcept { return &r_->cur_; }
        iterator& operator++() {
            r_->advance();
            return *this;
        }
        void operator++(int) { ++*this; }
        bool operator==(sentinel) const noexcept { return !r_ || r_->done_; }
        bool operator!=(sentinel s) const noexcept { return !(*this == s); }
        friend bool operator==(sentinel s, const iterator& i) noexcept { return i == s; }
        friend bool operator!=(sentinel s, const iterator& i) noexcept { return i != s; }

    private:
        friend class OrderedRange;
        explicit iterator(OrderedRange* r) noexcept : r_(r) {}
        OrderedRange* r_ = nullptr;
    };

    /// Starts the iteration (reads the first entry) unless it already started.
    iterator begin() {
        if (!started_) {
            started_ = true;
            advance();
        }
        return iterator(this);
    }
    sentinel end() const noexcept { return {}; }

    /// The next entry, or nullopt at the end (an alternative to range-for).
    std::optional<value_type> next() {
        started_ = true;
        advance();
        if (done_) return std::nullopt;
        return cur_;
    }

    /// The C handle. Owned by this object.
    shoal_ordered_iter* handle() const noexcept { return h_.get(); }

private:
    friend class OrderedMap;
    friend class OrderedSnapshot;
    explicit OrderedRange(shoal_ordered_iter* it) noexcept : h_(it) {}
    void advance() {
        const void *k = nullptr, *v = nullptr;
        std::size_t kl = 0, vl = 0;
        shoal_status rc = shoal_ordered_iter_next(h_.get(), &k, &kl, &v, &vl);
        if (rc == SHOAL_DONE) {
            done_ = true;
            cur_ = {};
            return;
        }
        if (rc != SHOAL_OK) {
            done_ = true;
            detail::raise(rc, "shoal_ordered_iter_next");
        }
        cur_ = {std::string_view(static_cast<const char*>(k), kl),
                std::string_view(static_cast<const char*>(v), vl)};
    }
    struct Close {
        void operator()(shoal_ordered_iter* i) const noexcept { shoal_ordered_iter_close(i); }
    };
    std::unique_ptr<shoal_ordered_iter, Close> h_;
    value_type cur_;
    bool started_ = false;
    bool done_ = false;
};

/// A position in an ordered map's snapshot (OrderedSnapshot::cursor): it seeks, steps
/// both ways and says where it stands. Every move returns whether the cursor then stands
/// on an entry (after one that returns false, reposition it with first(), last() or a
/// seek before stepping). In a multimap each (key, value) pair is an entry, in key order
/// then value order; next_key/prev_key move between keys, next_value/prev_value among one
/// key's values. The views key(), value() and entry() give stay valid until the next
/// call on the cursor. Move-only; bound to the thread that made it; it keeps its
/// snapshot's view even after the snapshot object is destroyed.
///
/// A cursor of a write transaction (OrderedTxn::cursor) reads the map as the transaction
/// has it, its own writes and its open nested transactions' included, and writes at
/// where it stands (put_current, remove_current). It stays usable across the
/// transaction's writes: it then stands on its entry as they left it or, if they removed
/// it, in the gap it left (next() goes to the entry after it, prev() to the one before).
/// Once the transaction is over, its calls throw SHOAL_INVALID.
class OrderedCursor {
public:
    using value_type = std::pair<std::string_view, std::string_view>;

    /// Moves to the first entry.
    bool first() { return moved(shoal_ordered_cursor_first(h_.get()), "shoal_ordered_cursor_first"); }
    /// Moves to the last entry.
    bool last() { return moved(shoal_ordered_cursor_last(h_.get()), "shoal_ordered_cursor_last"); }
    /// Moves to the next entry.
    bool next() { return moved(shoal_ordered_cursor_next(h_.get()), "shoal_ordered_cursor_next"); }
    /// Moves to the previous entry.
    bool prev() { return moved(shoal_ordered_cursor_prev(h_.get()), "shoal_ordered_cursor_prev"); }
    /// Moves to `key` (a multimap's first value of it); false (on no entry) if absent.
    bool seek(bytes_view key) {
        return moved(shoal_ordered_cursor_seek(h_.get(), key.data(), key.size()),
                     "shoal_ordered_cursor_seek");
    }
    /// Moves to the first entry whose key is at least `key` (the ceiling).
    bool seek_ge(bytes_view key) {
        return moved(shoal_ordered_cursor_seek_ge(h_.get(), key.data(), key.size()),
                     "shoal_ordered_cursor_seek_ge");
    }
    /// Moves to the last entry whose key is at most `key` (the floor).
    bool seek_le(bytes_view key) {
        return moved(shoal_ordered_cursor_seek_le(h_.get(), key.data(), key.size()),
                     "shoal_ordered_cursor_seek_le");
    }
    /// Multimap: moves to the first value of the next key.
    bool next_key() {
        return moved(shoal_ordered_cursor_next_key(h_.get()), "shoal_ordered_cursor_next_key");
    }
    /// Multimap: moves to the last value of the previous key.
    bool prev_key() {
        return moved(shoal_ordered_cursor_prev_key(h_.get()), "shoal_ordered_cursor_prev_key");
    }
    /// Multimap: moves to the next value of the same key (false: stays at its last).
    bool next_value() {
        return moved(shoal_ordered_cursor_next_value(h_.get()),
                     "shoal_ordered_cursor_next_value");
    }
    /// Multimap: moves to the previous value of the same key (false: stays at its first).
    bool prev_value() {
        return moved(shoal_ordered_cursor_prev_value(h_.get()),
                     "shoal_ordered_cursor_prev_value");
    }
    /// Multimap: moves to the pair (key, value), or with `ge` to the first value of `key`
    /// at least `value`.
    bool seek_value(bytes_view key, bytes_view value, bool ge = false) {
        return moved(shoal_ordered_cursor_seek_value(h_.get(), key.data(), key.size(),
                                                     value.data(), value.size(), ge),
                     "shoal_ordered_cursor_seek_value");
    }
    /// The entry the cursor stands on, or nullopt.
    std::optional<value_type> entry() const {
        const void *k = nullptr, *v = nullptr;
        std::size_t kl = 0, vl = 0;
        shoal_status rc = shoal_ordered_cursor_get(h_.get(), &k, &kl, &v, &vl);
        if (rc == SHOAL_NOT_FOUND) return std::nullopt;
        detail::check(rc, "shoal_ordered_cursor_get");
        return value_type{std::string_view(static_cast<const char*>(k), kl),
                          std::string_view(static_cast<const char*>(v), vl)};
    }
    /// The key the cursor stands on (empty on no entry: check the last move or entry()).
    std::string_view key() const { return entry().value_or(value_type{}).first; }
    /// The value the cursor stands on (empty on no entry).
    std::string_view value() const { return entry().value_or(value_type{}).second; }
    /// The number of entries before the cursor's, or nullopt on no entry.
    std::optional<std::uint64_t> position() const {
        std::uint64_t p = 0;
        shoal_status rc = shoal_ordered_cursor_position(h_.get(), &p);
        if (rc == SHOAL_NOT_FOUND) return std::nullopt;
        detail::check(rc, "shoal_ordered_cursor_position");
        return p;
    }
    /// The number of values of the key the cursor stands on (0 on no entry).
    std::uint64_t count_values() const {
        std::uint64_t n = 0;
        detail::check(shoal_ordered_cursor_count_values(h_.get(), &n),
                      "shoal_ordered_cursor_count_values");
        return n;
    }

    /// Write transaction's cursor: sets the value of the entry it stands on (in a
    /// multimap, replaces the pair; the cursor follows it); false if on no entry.
    bool put_current(bytes_view value) {
        return moved(shoal_ordered_cursor_put_current(h_.get(), value.data(), value.size()),
                     "shoal_ordered_cursor_put_current");
    }
    /// Write transaction's cursor: removes the entry it stands on, leaving the cursor in
    /// its gap; false if on no entry.
    bool remove_current() {
        return moved(shoal_ordered_cursor_remove_current(h_.get()),
                     "shoal_ordered_cursor_remove_current");
    }

    /// The C handle. Owned by this object.
    shoal_ordered_cursor* handle() const noexcept { return h_.get(); }

private:
    friend class OrderedSnapshot;
    friend class OrderedTxn;
    explicit OrderedCursor(shoal_ordered_cursor* c) noexcept : h_(c) {}
    static bool moved(shoal_status rc, const char* name) {
        if (rc == SHOAL_OK) return true;
        if (rc == SHOAL_NOT_FOUND) return false;
        detail::raise(rc, name);
    }
    struct Close {
        void operator()(shoal_ordered_cursor* c) const noexcept { shoal_ordered_cursor_close(c); }
    };
    std::unique_ptr<shoal_ordered_cursor, Close> h_;
};

/// A consistent view of an ordered map (OrderedMap::snapshot): every read sees the map as
/// of one commit, for as long as it lives, and never makes a writer wait. Move-only;
/// bound to the thread that took it (calls from another throw SHOAL_INVALID).
class OrderedSnapshot {
public:
    /// The value of `key`, or nullopt.
    std::optional<std::string> get(bytes_view key) const {
        std::string v;
        if (!detail::read_value(
                [&](void* b, std::size_t c, std::size_t* l) {
                    return shoal_ordered_snapshot_get(h_.get(), key.data(), key.size(), b, c, l);
                },
                v, "shoal_ordered_snapshot_get"))
            return std::nullopt;
        return v;
    }
    /// Whether `key` is in the snapshot.
    bool contains(bytes_view key) const {
        std::size_t len = 0;
        shoal_status rc =
            shoal_ordered_snapshot_get(h_.get(), key.data(), key.size(), nullptr, 0, &len);
        if (rc == SHOAL_NOT_FOUND) return false;
        if (rc != SHOAL_OK && rc != SHOAL_BUFFER_TOO_SMALL)
            detail::raise(rc, "shoal_ordered_snapshot_get");
        return true;
    }
    /// Entries in the snapshot.
    std::uint64_t size() const {
        std::uint64_t n = 0;
        detail::check(shoal_ordered_snapshot_len(h_.get(), &n, nullptr),
                      "shoal_ordered_snapshot_len");
        return n;
    }
    /// The number of the commit the snapshot shows.
    std::uint64_t sequence() const {
        std::uint64_t n = 0, seq = 0;
        detail::check(shoal_ordered_snapshot_len(h_.get(), &n, &seq),
                      "shoal_ordered_snapshot_len");
        return seq;
    }
    /// The exact number of entries with lo <= key < hi.
    std::uint64_t count_range(Bound lo = std::nullopt, Bound hi = std::nullopt) const {
        shoal_bytes a, b;
        std::uint64_t n = 0;
        detail::check(shoal_ordered_snapshot_count_range(h_.get(), detail::bound_ptr(lo, a),
                                                         detail::bound_ptr(hi, b), &n),
                      "shoal_ordered_snapshot_count_range");
        return n;
    }
    /// The entries with lo <= key < hi, in key order (descending with `reverse`).
    OrderedRange range(Bound lo = std::nullopt, Bound hi = std::nullopt,
                       bool reverse = false) const {
        shoal_bytes a, b;
        shoal_ordered_iter* it = nullptr;
        detail::check(shoal_ordered_snapshot_range(h_.get(), detail::bound_ptr(lo, a),
                                                   detail::bound_ptr(hi, b),
                                                   reverse ? SHOAL_ORDERED_REVERSE : 0, &it),
                      "shoal_ordered_snapshot_range");
        return OrderedRange(it);
    }

    /// A cursor over this snapshot, standing on no entry until it moves.
    OrderedCursor cursor() const {
        shoal_ordered_cursor* c = nullptr;
        detail::check(shoal_ordered_cursor_open(h_.get(), &c), "shoal_ordered_cursor_open");
        return OrderedCursor(c);
    }

    /// The C handle. Owned by this object.
    shoal_ordered_snapshot* handle() const noexcept { return h_.get(); }

private:
    friend class OrderedMap;
    explicit OrderedSnapshot(shoal_ordered_snapshot* s) noexcept : h_(s) {}
    struct Close {
        void operator()(shoal_ordered_snapshot* s) const noexcept {
            shoal_ordered_snapshot_close(s);
        }
    };
    std::unique_ptr<shoal_ordered_snapshot, Close> h_;
};

/// A write transaction over one or several ordered maps of a store (OrderedMap::write,
/// OrderedMap::write_many): its writes are seen by no one else until commit(), and by
/// everyone together then. Destroyed without commit() (an exception unwinding through
/// it, an early return), it aborts: nothing it wrote is ever seen. Move-only; bound to
/// the thread that began it. The map-less calls act on the first map.
class OrderedTxn {
public:
    /// Sets `key` to `value` in `map` (insert or replace).
    void put(const OrderedMap& map, bytes_view key, bytes_view value);
    /// Sets `key` to `value` if absent; false (nothing changed) if present.
    bool insert(const OrderedMap& map, bytes_view key, bytes_view value);
    /// Sets `key` to `value` if present; false (nothing changed) if absent.
    bool replace(const OrderedMap& map, bytes_view key, bytes_view value);
    /// Removes `key`; false if it was absent.
    bool remove(const OrderedMap& map, bytes_view key);
    /// Removes the pair (key, value); false if there was no such pair.
    bool remove_value(const OrderedMap& map, bytes_view key, bytes_view value);
    /// The value of `key` as this transaction sees it (its own writes included).
    std::optional<std::string> get(const OrderedMap& map, bytes_view key);
    /// Adds `key` -> `value` past the map's largest key (a sorted bulk load into full
    /// pages). Throws shoal::Error (SHOAL_INVALID for a key not above the largest; the
    /// transaction stays usable).
    void append(const OrderedMap& map, bytes_view key, bytes_view value);
    /// The map's sequence as this transaction has it, then adds `n` to it (kept by the
    /// commit, dropped by an abort).
    std::uint64_t next_sequence(const OrderedMap& map, std::uint64_t n = 1);
    /// Sets the store's marker `i` (below 14) to `v` at the commit.
    void set_marker(std::uint64_t i, std::uint64_t v) {
        detail::check(shoal_ordered_txn_set_marker(live("shoal_ordered_txn_set_marker"), i, v),
                      "shoal_ordered_txn_set_marker");
    }

    void put(bytes_view key, bytes_view value) { put(*first_, key, value); }
    bool insert(bytes_view key, bytes_view value) { return insert(*first_, key, value); }
    bool replace(bytes_view key, bytes_view value) { return replace(*first_, key, value); }
    bool remove(bytes_view key) { return remove(*first_, key); }
    std::optional<std::string> get(bytes_view key) { return get(*first_, key); }

    /// A cursor over `map` as this transaction has it (see OrderedCursor), standing on no
    /// entry until it moves.
    OrderedCursor cursor(const OrderedMap& map);
    /// A cursor over the first map as this transaction has it.
    OrderedCursor cursor() { return cursor(*first_); }

    /// A nested transaction (a savepoint), RAII: `{ auto n = txn.nested(); ...;
    /// n.commit(); }`. Until it ends, this transaction's calls act in it; commit() keeps
    /// its writes in the parent; destroyed without commit() (an exception, an early
    /// return) it undoes them, and the parent goes on. Nested ones nest again (end them
    /// innermost first, as scopes do). Neither copyable nor movable.
    class Nested {
    public:
        explicit Nested(OrderedTxn& txn) : t_(&txn) {
            detail::check(
                shoal_ordered_txn_nested_begin(txn.live("shoal_ordered_txn_nested_begin")),
                "shoal_ordered_txn_nested_begin");
        }
        Nested(const Nested&) = delete;
        Nested& operator=(const Nested&) = delete;
        ~Nested() { abort(); }
        /// Keeps this nested transaction's writes in its parent.
        void commit() {
            if (!open_) throw Error(SHOAL_INVALID, "the nested transaction is over");
            open_ = false;
            detail::check(
                shoal_ordered_txn_nested_commit(t_->live("shoal_ordered_txn_nested_commit")),
                "shoal_ordered_txn_nested_commit");
        }
        /// Undoes this nested transaction's writes (what the destructor does).
        void abort() noexcept {
            if (open_ && t_->h_) shoal_ordered_txn_nested_abort(t_->h_.get());
            open_ = false;
        }
        /// Whether it is still open.
        bool active() const noexcept { return open_ && t_->h_; }

    private:
        OrderedTxn* t_;
        bool open_ = true;
    };
    /// Opens a nested transaction (see Nested).
    Nested nested() { return Nested(*this); }

    /// Commits every write at once; returns the commit's sequence number. The
    /// transaction is over afterwards, committed or (on an exception) not, except when
    /// a nested transaction is still open (SHOAL_INVALID: it stays open).
    std::uint64_t commit() {
        std::uint64_t seq = 0;
        shoal_status rc = shoal_ordered_txn_commit(live("shoal_ordered_txn_commit"), &seq);
        if (rc == SHOAL_INVALID) detail::raise(rc, "shoal_ordered_txn_commit");
        h_.release();
        detail::check(rc, "shoal_ordered_txn_commit");
        return seq;
    }
    /// Drops every write (also what the destructor does without commit()).
    void abort() noexcept { h_.reset(); }
    /// Whether the transaction is still open.
    bool active() const noexcept { return h_ != nullptr; }

    /// The C handle (null after commit or abort). Owned by this object.
    shoal_ordered_txn* handle() const noexcept { return h_.get(); }

private:
    friend class OrderedMap;
    OrderedTxn(shoal_ordered_txn* t, const OrderedMap* first) noexcept : h_(t), first_(first) {}
    shoal_ordered_txn* live(const char* call) const {
        if (!h_) throw Error(SHOAL_INVALID, std::string(call) + ": the transaction is over");
        return h_.get();
    }
    struct Abort {
        void operator()(shoal_ordered_txn* t) const noexcept { shoal_ordered_txn_abort(t); }
    };
    std::unique_ptr<shoal_ordered_txn, Abort> h_;
    const OrderedMap* first_;
};

/// A map whose keys are kept in bytewise order (Store::ordered_map). Move-only; closes
/// its handle when destroyed (the map stays in the store). Usable from many threads at
/// once. Range-for yields every entry in key order, from a snapshot taken at begin().
class OrderedMap {
public:
    /// Opens the ordered map `name` of `store`, creating it if absent and `create`.
    /// Throws shoal::Error (SHOAL_NOT_FOUND when absent and !create; SHOAL_INVALID for a
    /// map of another kind).
    /// `form`: for a map it creates, SHOAL_ORDERED_U64_KEYS and/or SHOAL_ORDERED_DUPS (an
    /// existing map opened with either must have been made with the same ones).
    OrderedMap(const Store& store, std::string_view name, bool create = true,
               std::uint32_t form = 0) {
        std::string n(name);
        shoal_ordered* m = nullptr;
        detail::check(shoal_ordered_open(store.handle(), n.c_str(),
                                         (create ? SHOAL_MAP_CREATE : 0) | form, &m),
                      "shoal_ordered_open");
        h_.reset(m);
    }

    /// The value of `key` (latest commit), or nullopt.
    std::optional<std::string> get(bytes_view key) const {
        std::string v;
        if (!get_into(key, v)) return std::nullopt;
        return v;
    }
    /// Copies the value of `key` into `out` (reusing its capacity); false if absent.
    bool get_into(bytes_view key, std::string& out) const {
        return detail::read_value(
            [&](void* b, std::size_t c, std::size_t* l) {
                return shoal_ordered_get(h_.get(), key.data(), key.size(), b, c, l);
            },
            out, "shoal_ordered_get");
    }
    /// Whether `key` is in the map.
    bool contains(bytes_view key) const {
        std::size_t len = 0;
        shoal_status rc = shoal_ordered_get(h_.get(), key.data(), key.size(), nullptr, 0, &len);
        if (rc == SHOAL_NOT_FOUND) return false;
        if (rc != SHOAL_OK && rc != SHOAL_BUFFER_TOO_SMALL) detail::raise(rc, "shoal_ordered_get");
        return true;
    }
    /// Sets `key` to `value` (insert or replace), committed at once.
    void put(bytes_view key, bytes_view value) const {
        detail::check(
            shoal_ordered_put(h_.get(), key.data(), key.size(), value.data(), value.size()),
            "shoal_ordered_put");
    }
    /// Sets `key` to `value` if absent; false (nothing changed) if present.
    bool insert(bytes_view key, bytes_view value) const {
        shoal_status rc = shoal_ordered_put_if_absent(h_.get(), key.data(), key.size(),
                                                      value.data(), value.size());
        if (rc == SHOAL_EXISTS) return false;
        detail::check(rc, "shoal_ordered_put_if_absent");
        return true;
    }
    /// Sets `key` to `value` if present; false (nothing changed) if absent.
    bool replace(bytes_view key, bytes_view value) const {
        shoal_status rc = shoal_ordered_put_if_present(h_.get(), key.data(), key.size(),
                                                       value.data(), value.size());
        if (rc == SHOAL_NOT_FOUND) return false;
        detail::check(rc, "shoal_ordered_put_if_present");
        return true;
    }
    /// Removes `key`; false if it was absent.
    bool remove(bytes_view key) const {
        shoal_status rc = shoal_ordered_remove(h_.get(), key.data(), key.size());
        if (rc == SHOAL_NOT_FOUND) return false;
        detail::check(rc, "shoal_ordered_remove");
        return true;
    }
    /// If the value of `key` is `expected` (nullopt: absent), sets it to `desired`
    /// (nullopt: removes it); false (nothing changed) otherwise.
    bool compare_and_swap(bytes_view key, std::optional<bytes_view> expected,
                          std::optional<bytes_view> desired) const {
        std::uint32_t flags = (expected ? 0u : SHOAL_CAS_EXPECT_ABSENT) |
                              (desired ? 0u : SHOAL_CAS_REMOVE);
        bytes_view e = expected.value_or(bytes_view{}), d = desired.value_or(bytes_view{});
        shoal_status rc = shoal_ordered_compare_and_swap(h_.get(), key.data(), key.size(),
                                                         e.data(), e.size(), d.data(),
                                                         d.size(), flags);
        if (rc == SHOAL_MISMATCH) return false;
        detail::check(rc, "shoal_ordered_compare_and_swap");
        return true;
    }
    /// Removes every entry with lo <= key < hi; returns how many.
    std::uint64_t remove_range(Bound lo = std::nullopt, Bound hi = std::nullopt) const {
        shoal_bytes a, b;
        std::uint64_t n = 0;
        detail::check(shoal_ordered_remove_range(h_.get(), detail::bound_ptr(lo, a),
                                                 detail::bound_ptr(hi, b), &n),
                      "shoal_ordered_remove_range");
        return n;
    }
    /// Removes the pair (key, value) (a multimap's; otherwise `key` if its value is
    /// `value`); false if there was no such pair.
    bool remove_value(bytes_view key, bytes_view value) const {
        shoal_status rc = shoal_ordered_remove_value(h_.get(), key.data(), key.size(),
                                                     value.data(), value.size());
        if (rc == SHOAL_NOT_FOUND) return false;
        detail::check(rc, "shoal_ordered_remove_value");
        return true;
    }
    /// Every value of `key`, sorted (a multimap's; at most one otherwise).
    std::vector<std::string> values(bytes_view key) const {
        std::vector<std::string> out;
        auto cb = [](void* ctx, const void* v, std::size_t len) -> int {
            static_cast<std::vector<std::string>*>(ctx)->emplace_back(
                static_cast<const char*>(v), len);
            return 0;
        };
        detail::check(shoal_ordered_values(h_.get(), key.data(), key.size(), cb, &out, nullptr),
                      "shoal_ordered_values");
        return out;
    }
    /// The map's sequence (a persistent counter) as of the latest commit.
    std::uint64_t sequence() const {
        std::uint64_t v = 0;
        detail::check(shoal_ordered_sequence(h_.get(), &v), "shoal_ordered_sequence");
        return v;
    }
    /// Entries in the map.
    std::uint64_t size() const {
        std::uint64_t n = 0;
        detail::check(shoal_ordered_len(h_.get(), &n), "shoal_ordered_len");
        return n;
    }
    /// The exact number of entries with lo <= key < hi.
    std::uint64_t count_range(Bound lo = std::nullopt, Bound hi = std::nullopt) const {
        shoal_bytes a, b;
        std::uint64_t n = 0;
        detail::check(shoal_ordered_count_range(h_.get(), detail::bound_ptr(lo, a),
                                                detail::bound_ptr(hi, b), &n),
                      "shoal_ordered_count_range");
        return n;
    }
    /// The entries with lo <= key < hi in key order (descending with `reverse`), from a
    /// snapshot taken now that lasts as long as the range.
    OrderedRange range(Bound lo = std::nullopt, Bound hi = std::nullopt,
                       bool reverse = false) const {
        shoal_bytes a, b;
        shoal_ordered_iter* it = nullptr;
        detail::check(shoal_ordered_range(h_.get(), detail::bound_ptr(lo, a),
                                          detail::bound_ptr(hi, b),
                                          reverse ? SHOAL_ORDERED_REVERSE : 0, &it),
                      "shoal_ordered_range");
        return OrderedRange(it);
    }
    /// Names of the ordered maps of `store`.
    static std::vector<std::string> names(const Store& store) {
        std::vector<std::string> out;
        auto cb = [](void* ctx, const char* name, std::size_t len) -> int {
            static_cast<std::vector<std::string>*>(ctx)->emplace_back(name, len);
            return 0;
        };
        detail::check(shoal_store_ordered_maps(store.handle(), cb, &out),
                      "shoal_store_ordered_maps");
        return out;
    }
    /// A snapshot of the map as of its latest commit.
    OrderedSnapshot snapshot() const {
        shoal_ordered_snapshot* s = nullptr;
        detail::check(shoal_ordered_snapshot_open(h_.get(), &s), "shoal_ordered_snapshot_open");
        return OrderedSnapshot(s);
    }
    /// Snapshots of several maps of one store, all as of one commit (in the order given).
    static std::vector<OrderedSnapshot> snapshot_many(
        std::initializer_list<const OrderedMap*> maps) {
        std::vector<const shoal_ordered*> hs;
        for (const OrderedMap* m : maps) hs.push_back(m->h_.get());
        std::vector<shoal_ordered_snapshot*> out(hs.size(), nullptr);
        detail::check(shoal_ordered_snapshot_open_many(hs.data(), hs.size(), out.data()),
                      "shoal_ordered_snapshot_open_many");
        std::vector<OrderedSnapshot> snaps;
        for (shoal_ordered_snapshot* s : out) snaps.push_back(OrderedSnapshot(s));
        return snaps;
    }
    /// Begins a write transaction over this map (one writer per map at a time; others
    /// wait up to the store's lock timeout, then SHOAL_TIMEOUT).
    OrderedTxn write() const { return write_many({this}); }
    /// Begins a write transaction over several maps of one store, committed together.
    static OrderedTxn write_many(std::initializer_list<const OrderedMap*> maps) {
        std::vector<const shoal_ordered*> hs;
        for (const OrderedMap* m : maps) hs.push_back(m->h_.get());
        shoal_ordered_txn* t = nullptr;
        detail::check(shoal_ordered_txn_begin(hs.data(), hs.size(), &t),
                      "shoal_ordered_txn_begin");
        return OrderedTxn(t, maps.size() ? *maps.begin() : nullptr);
    }

    /// Range-for over every entry in key order (a snapshot taken at begin()); for a
    /// bounded or reverse walk, use range().
    OrderedRange all() const { return range(); }

    /// The C handle. Owned by this object.
    shoal_ordered* handle() const noexcept { return h_.get(); }

private:
    struct Close {
        void operator()(shoal_ordered* m) const noexcept { shoal_ordered_close(m); }
    };
    std::unique_ptr<shoal_ordered, Close> h_;
};

inline OrderedMap Store::ordered_map(std::string_view name, bool create) const {
    return OrderedMap(*this, name, create);
}

inline void OrderedTxn::put(const OrderedMap& map, bytes_view key, bytes_view value) {
    detail::check(shoal_ordered_txn_put(live("shoal_ordered_txn_put"), map.handle(), key.data(),
                                        key.size(), value.data(), value.size()),
                  "shoal_ordered_txn_put");
}
inline bool OrderedTxn::insert(const OrderedMap& map, bytes_view key, bytes_view value) {
    shoal_status rc =
        shoal_ordered_txn_put_if_absent(live("shoal_ordered_txn_put_if_absent"), map.handle(),
                                        key.data(), key.size(), value.data(), value.size());
    if (rc == SHOAL_EXISTS) return false;
    detail::check(rc, "shoal_ordered_txn_put_if_absent");
    return true;
}
inline bool OrderedTxn::replace(const OrderedMap& map, bytes_view key, bytes_view value) {
    shoal_status rc =
        shoal_ordered_txn_put_if_present(live("shoal_ordered_txn_put_if_present"), map.handle(),
                                         key.data(), key.size(), value.data(), value.size());
    if (rc == SHOAL_NOT_FOUND) return false;
    detail::check(rc, "shoal_ordered_txn_put_if_present");
    return true;
}
inline bool OrderedTxn::remove_value(const OrderedMap& map, bytes_view key, bytes_view value) {
    shoal_status rc = shoal_ordered_txn_remove_value(live("shoal_ordered_txn_remove_value"),
                                                     map.handle(), key.data(), key.size(),
                                                     value.data(), value.size());
    if (rc == SHOAL_NOT_FOUND) return false;
    detail::check(rc, "shoal_ordered_txn_remove_value");
    return true;
}
inline bool OrderedTxn::remove(const OrderedMap& map, bytes_view key) {
    shoal_status rc = shoal_ordered_txn_remove(live("shoal_ordered_txn_remove"), map.handle(),
                                               key.data(), key.size());
    if (rc == SHOAL_NOT_FOUND) return false;
    detail::check(rc, "shoal_ordered_txn_remove");
    return true;
}
inline void OrderedTxn::append(const OrderedMap& map, bytes_view key, bytes_view value) {
    detail::check(shoal_ordered_txn_append(live("shoal_ordered_txn_append"), map.handle(),
                                           key.data(), key.size(), value.data(), value.size()),
                  "shoal_ordered_txn_append");
}
inline std::uint64_t OrderedTxn::next_sequence(const OrderedMap& map, std::uint64_t n) {
    std::uint64_t v = 0;
    detail::check(shoal_ordered_txn_next_sequence(live("shoal_ordered_txn_next_sequence"),
                                                  map.handle(), n, &v),
                  "shoal_ordered_txn_next_sequence");
    return v;
}
inline OrderedCursor OrderedTxn::cursor(const OrderedMap& map) {
    shoal_ordered_cursor* c = nullptr;
    detail::check(shoal_ordered_txn_cursor_open(live("shoal_ordered_txn_cursor_open"),
                                                map.handle(), &c),
                  "shoal_ordered_txn_cursor_open");
    return OrderedCursor(c);
}
inline std::optional<std::string> OrderedTxn::get(const OrderedMap& map, bytes_view key) {
    shoal_ordered_txn* t = live("shoal_ordered_txn_get");
    std::string v;
    if (!detail::read_value(
            [&](void* b, std::size_t c, std::size_t* l) {
                return shoal_ordered_txn_get(t, map.handle(), key.data(), key.size(), b, c, l);
            },
            v, "shoal_ordered_txn_get"))
        return std::nullopt;
    return v;
}


// ---------------------------------------------------------------------------------------
// Logs: a ring of records that every thread of every process appends to without a lock,
// drained in order by named readers whose cursors live in the store file.

/// The level numbers Shoal's bindings write (the log itself gives levels no meaning):
/// the syslog severities, most severe first, and Trace below Debug. Python's
/// shoal.LogLevel has the same numbers.
enum class LogLevel : std::uint8_t {
    Emergency = 0,
    Alert = 1,
    Critical = 2,
    Error = 3,
    Warning = 4,
    Notice = 5,
    Info = 6,
    Debug = 7,
    Trace = 8,
};

/// What an append does when the ring is full (shoal_log_options.policy).
enum class LogPolicy : std::uint32_t {
    /// Overwrite the oldest records; readers count what they missed.
    Overwrite = SHOAL_LOG_OVERWRITE,
    /// Wait for room, at most the append's timeout.
    Wait = SHOAL_LOG_WAIT,
    /// Drop the new record and count it (append returns nullopt).
    Drop = SHOAL_LOG_DROP,
};

/// How a new log is made (Log): `slots` records (2 to 2^32) of up to `max_record` bytes
/// each (the message, and per field its key, its value and 8 bytes), its full policy, and
/// how many named readers it can have (0: 8).
struct LogOptions {
    /// Records the ring holds.
    std::uint64_t slots = 0;
    /// The largest record, in bytes.
    std::size_t max_record = 0;
    /// What an append to a full ring does.
    LogPolicy policy = LogPolicy::Overwrite;
    /// Named readers it can have (0: 8).
    std::uint32_t readers = 0;
};

/// A field of a record being appended: a key and a value, both bytes.
using LogField = std::pair<bytes_view, bytes_view>;

/// A record as a LogReader read it (a copy).
struct LogRecord {
    /// Its sequence number: the order writers reserved records in, which readers read.
    std::uint64_t seq = 0;
    /// When it was appended, nanoseconds since the Unix epoch.
    std::uint64_t time_ns = 0;
    /// Its writer's process id.
    std::uint32_t pid = 0;
    /// Its writer's thread id (gettid).
    std::uint32_t tid = 0;
    /// Its level, as the writer gave it.
    std::uint8_t level = 0;
    /// Its message.
    std::string message;
    /// Its fields, in the writer's order.
    std::vector<std::pair<std::string, std::string>> fields;

    /// The value of the first field named `key`, or nullopt.
    std::optional<std::string_view> field(std::string_view key) const {
        for (const auto& f : fields)
            if (f.first == key) return std::string_view(f.second);
        return std::nullopt;
    }
};

class Log;

/// A named reader of a log (Log::reader): reads its records in sequence order, each once,
/// from a cursor kept in the store file, so that a reader opened again under its name (by
/// a restarted process) resumes where the last one stopped. Move-only; one thread at a
/// time.
class LogReader {
public:
    /// The next record, waiting up to `timeout` for a writer to publish one (zero: not
    /// at all); nullopt if none came. Throws shoal::Error.
    std::optional<LogRecord> read(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
        std::optional<LogRecord> out;
        auto take = [](void* ctx, const shoal_log_record* r) {
            // The callback must not unwind into the C library: a bad_alloc is caught and
            // the record is then missing, which read reports by throwing.
            try {
                *static_cast<std::optional<LogRecord>*>(ctx) = copy(*r);
            } catch (...) {
            }
        };
        shoal_status rc = shoal_log_read(h_.get(), millis(timeout), take, &out);
        if (rc == SHOAL_EMPTY) return std::nullopt;
        detail::check(rc, "shoal_log_read");
        if (!out) throw std::bad_alloc();
        return out;
    }

    /// The next records, at most `max`, read in one pass (shoal_log_read_batch: as many
    /// as were published in a row, the cursor moved past all of them at once), waiting up
    /// to `timeout` for a first one (zero: not at all); empty if none came. The way to
    /// drain a busy log. Throws shoal::Error (SHOAL_INVALID for a `max` of 0).
    std::vector<LogRecord> read_batch(std::size_t max,
                                      std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
        std::vector<shoal_log_record> raw(max);
        std::size_t n = 0;
        shoal_status rc = shoal_log_read_batch(h_.get(), millis(timeout), raw.data(), max, &n);
        std::vector<LogRecord> out;
        if (rc == SHOAL_EMPTY) return out;
        detail::check(rc, "shoal_log_read_batch");
        out.reserve(n);
        for (std::size_t i = 0; i < n; i++) out.push_back(copy(raw[i]));
        return out;
    }

    /// read(timeout): the next record, waiting up to `timeout` for one.
    std::optional<LogRecord> read_wait(std::chrono::milliseconds timeout) { return read(timeout); }

    /// The next sequence number this reader reads.
    std::uint64_t position() const { return stat(0); }
    /// Records overwritten before this reader (under its name) read them.
    std::uint64_t missed() const { return stat(1); }
    /// Holes this reader passed: records whose writer died before publishing them.
    std::uint64_t skipped() const { return stat(2); }

    /// The C handle, for calls this wrapper does not cover. Owned by this object.
    shoal_log_reader* handle() const noexcept { return h_.get(); }

private:
    friend class Log;
    explicit LogReader(shoal_log_reader* r) noexcept : h_(r) {}
    static std::uint64_t millis(std::chrono::milliseconds t) {
        return t.count() < 0 ? 0 : static_cast<std::uint64_t>(t.count());
    }
    static LogRecord copy(const shoal_log_record& r) {
        LogRecord rec;
        rec.seq = r.seq;
        rec.time_ns = r.time_ns;
        rec.pid = r.pid;
        rec.tid = r.tid;
        rec.level = r.level;
        rec.message.assign(r.message ? r.message : "", r.message_len);
        for (std::size_t i = 0; i < r.n_fields; i++) {
            const shoal_log_field& f = r.fields[i];
            rec.fields.emplace_back(std::string(static_cast<const char*>(f.key), f.key_len),
                                    std::string(static_cast<const char*>(f.value), f.value_len));
        }
        return rec;
    }
    std::uint64_t stat(int which) const {
        std::uint64_t v[3] = {0, 0, 0};
        detail::check(shoal_log_reader_stats(h_.get(), &v[0], &v[1], &v[2]),
                      "shoal_log_reader_stats");
        return v[which];
    }
    struct Close {
        void operator()(shoal_log_reader* r) const noexcept { shoal_log_reader_close(r); }
    };
    std::unique_ptr<shoal_log_reader, Close> h_;
};

/// One record being written as a stream (`log.info() << "x=" << x;`): what is streamed
/// into it becomes its message, and it is appended when the temporary is destroyed, at
/// the end of the full expression. An append that fails throws from that destructor. A
/// statement that an exception leaves half done (a streamed expression threw) appends
/// nothing: its record was never finished, and a destructor must not throw while an
/// exception unwinds the stack.
class LogLine {
public:
    LogLine(const LogLine&) = delete;
    LogLine& operator=(const LogLine&) = delete;
    LogLine(LogLine&&) = delete;
    LogLine& operator=(LogLine&&) = delete;

    /// Streams `v` into the message, as into a std::ostringstream.
    template <class T>
    LogLine& operator<<(const T& v) {
        os_ << v;
        return *this;
    }
    /// Adds a field to the record.
    LogLine& field(bytes_view key, bytes_view value) {
        fields_.emplace_back(std::string(key.str()), std::string(value.str()));
        return *this;
    }

    ~LogLine() noexcept(false);

private:
    friend class Log;
    LogLine(const Log& log, LogLevel level) : log_(log), level_(level), unwinding_(std::uncaught_exceptions()) {}
    const Log& log_;
    LogLevel level_;
    int unwinding_;
    std::ostringstream os_;
    std::vector<std::pair<std::string, std::string>> fields_;
};

/// A log of a store (shoal_log_open): a ring of records that every thread of every
/// process may append to without a lock or a system call, drained in order by named
/// readers. Move-only; closes its handle when destroyed (readers opened from it stay
/// usable). Usable from many threads at once.
class Log {
public:
    /// Opens the log `name`, creating it with `opts` if it does not exist (an existing log
    /// keeps its geometry). Throws shoal::Error (SHOAL_INVALID for options out of range
    /// or an object of another kind by that name).
    Log(const Store& store, const std::string& name, const LogOptions& opts) {
        shoal_log_options o{};
        o.struct_size = sizeof o;
        o.slots = opts.slots;
        o.max_record = opts.max_record;
        o.policy = static_cast<std::uint32_t>(opts.policy);
        o.readers = opts.readers;
        shoal_log* l = nullptr;
        detail::check(shoal_log_open(store.handle(), name.c_str(), &o, &l), "shoal_log_open");
        h_.reset(l);
    }

    /// Opens the existing log `name`. Throws shoal::Error (SHOAL_NOT_FOUND).
    Log(const Store& store, const std::string& name) {
        shoal_log* l = nullptr;
        detail::check(shoal_log_open(store.handle(), name.c_str(), nullptr, &l), "shoal_log_open");
        h_.reset(l);
    }

    /// Appends a record of `level`, `message` and `fields`: its sequence number, or
    /// nullopt if the ring was full and the log drops. Under the wait policy it waits up
    /// to `timeout` for room (zero: the store's lock timeout), then throws SHOAL_TIMEOUT.
    /// A record larger than the log's max_record throws SHOAL_INVALID and appends nothing.
    std::optional<std::uint64_t> append(LogLevel level, bytes_view message,
                                        std::initializer_list<LogField> fields = {},
                                        std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) const {
        return append_raw(static_cast<std::uint8_t>(level), message, fields.begin(), fields.size(), timeout);
    }
    /// append with the fields in a vector.
    std::optional<std::uint64_t> append(LogLevel level, bytes_view message,
                                        const std::vector<LogField>& fields,
                                        std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) const {
        return append_raw(static_cast<std::uint8_t>(level), message, fields.data(), fields.size(), timeout);
    }
    /// append with a level number of the caller's own (0 to 255).
    std::optional<std::uint64_t> append(std::uint8_t level, bytes_view message,
                                        std::initializer_list<LogField> fields = {},
                                        std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) const {
        return append_raw(level, message, fields.begin(), fields.size(), timeout);
    }

    /// Appends a record of `level` whose message is `fmt` formatted as printf(3) does; its
    /// sequence number as append. Throws shoal::Error (SHOAL_INVALID for a format
    /// vsnprintf rejects, or a message larger than max_record).
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 3, 4)))
#endif
    std::optional<std::uint64_t> printf(LogLevel level, const char* fmt, ...) const {
        char stack[512];
        std::va_list ap;
        va_start(ap, fmt);
        int n = std::vsnprintf(stack, sizeof stack, fmt, ap);
        va_end(ap);
        if (n < 0) throw Error(SHOAL_INVALID, "shoal::Log::printf: vsnprintf rejected the format");
        if (static_cast<std::size_t>(n) < sizeof stack)
            return append(level, bytes_view(stack, static_cast<std::size_t>(n)));
        std::string heap(static_cast<std::size_t>(n) + 1, '\0');
        va_start(ap, fmt);
        std::vsnprintf(heap.data(), heap.size(), fmt, ap);
        va_end(ap);
        return append(level, bytes_view(heap.data(), static_cast<std::size_t>(n)));
    }

    /// A record of `level` written as a stream: `log.line(shoal::LogLevel::Info) << "x="
    /// << x;` appends it at the end of the statement (see LogLine).
    LogLine line(LogLevel level) const { return LogLine(*this, level); }
    /// line(LogLevel::Trace).
    LogLine trace() const { return line(LogLevel::Trace); }
    /// line(LogLevel::Debug).
    LogLine debug() const { return line(LogLevel::Debug); }
    /// line(LogLevel::Info).
    LogLine info() const { return line(LogLevel::Info); }
    /// line(LogLevel::Notice).
    LogLine notice() const { return line(LogLevel::Notice); }
    /// line(LogLevel::Warning).
    LogLine warning() const { return line(LogLevel::Warning); }
    /// line(LogLevel::Error).
    LogLine error() const { return line(LogLevel::Error); }
    /// line(LogLevel::Critical).
    LogLine critical() const { return line(LogLevel::Critical); }

    /// The reader `name`, created if the log has none by that name (a new reader starts
    /// at the oldest record the ring holds). Throws shoal::Error (SHOAL_FULL at the log's
    /// maximum of readers, SHOAL_INVALID for a bad name).
    LogReader reader(const std::string& name) const {
        shoal_log_reader* r = nullptr;
        detail::check(shoal_log_reader_open(h_.get(), name.c_str(), &r), "shoal_log_reader_open");
        return LogReader(r);
    }

    /// Forgets the reader `name` and its cursor; whether it existed.
    bool remove_reader(const std::string& name) const {
        std::uint32_t removed = 0;
        detail::check(shoal_log_remove_reader(h_.get(), name.c_str(), &removed),
                      "shoal_log_remove_reader");
        return removed != 0;
    }

    /// The C handle, for calls this wrapper does not cover. Owned by this object.
    shoal_log* handle() const noexcept { return h_.get(); }

private:
    std::optional<std::uint64_t> append_raw(std::uint8_t level, bytes_view message,
                                            const LogField* fields, std::size_t n,
                                            std::chrono::milliseconds timeout) const {
        std::vector<shoal_log_field> fs(n);
        for (std::size_t i = 0; i < n; i++) {
            fs[i].key = fields[i].first.data();
            fs[i].key_len = fields[i].first.size();
            fs[i].value = fields[i].second.data();
            fs[i].value_len = fields[i].second.size();
        }
        auto ms = timeout.count() < 0 ? 0 : static_cast<std::uint64_t>(timeout.count());
        std::uint64_t seq = 0;
        detail::check(shoal_log_append(h_.get(), level, message.data(), message.size(),
                                       fs.empty() ? nullptr : fs.data(), n, ms, &seq),
                      "shoal_log_append");
        if (seq == SHOAL_LOG_DROPPED) return std::nullopt;
        return seq;
    }

    struct Close {
        void operator()(shoal_log* l) const noexcept { shoal_log_close(l); }
    };
    std::unique_ptr<shoal_log, Close> h_;
};

inline LogLine::~LogLine() noexcept(false) {
    if (std::uncaught_exceptions() > unwinding_) return;
    std::vector<LogField> fs;
    fs.reserve(fields_.size());
    for (const auto& f : fields_) fs.emplace_back(f.first, f.second);
    log_.append(level_, os_.str(), fs);
}


}  // namespace shoal

#endif  // SHOAL_HPP
