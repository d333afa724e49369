// GoogleTest tests of the C++ wrapper shoal.hpp (and through it, the C API).
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "shoal.hpp"

namespace {

class ShoalTest : public ::testing::Test {
protected:
    void SetUp() override {
        const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = std::string("/tmp/shoal-gtest-") + std::to_string(getpid()) + "-" + t->name() +
                ".shoal";
        shoal::Store::destroy(path_);
    }
    void TearDown() override { shoal::Store::destroy(path_); }

    shoal::Options small() const {
        shoal::Options o;
        o.max_size = 256u << 20;
        return o;
    }

    std::string path_;
};

TEST_F(ShoalTest, RecordedTypes) {
    shoal::Store store(path_, small());
    shoal::MapOptions mo;
    mo.key_type = {SHOAL_TYPE_UTF8, 0};
    mo.value_type = {SHOAL_TYPE_USER, 42};
    shoal::Map m = store.map("typed", true, mo);
    EXPECT_EQ(m.key_type(), (shoal::DataType{SHOAL_TYPE_UTF8, 0}));
    EXPECT_EQ(store.map("typed", false).value_type(), (shoal::DataType{SHOAL_TYPE_USER, 42}));
    EXPECT_EQ(store.map("plain").key_type().code, SHOAL_TYPE_NONE);
    mo.value_type = {SHOAL_TYPE_JSON, 0};
    try {
        store.map("typed", true, mo);
        FAIL() << "a conflicting type was accepted";
    } catch (const shoal::Error& e) {
        EXPECT_EQ(e.code(), SHOAL_INVALID);
    }
    shoal::FixedOptions fo;
    fo.key_type = {SHOAL_TYPE_I64, 0};
    shoal::FixedMap f = store.fixed_map("ids", 8, 4, true, fo);
    EXPECT_EQ(f.key_type().code, SHOAL_TYPE_I64);
    EXPECT_EQ(f.value_type().code, SHOAL_TYPE_NONE);
}

TEST_F(ShoalTest, PutGetAndOptionalResults) {
    shoal::Store store(path_, small());
    shoal::Map m = store.map("users");
    EXPECT_EQ(m.put("alice", "admin"), shoal::PutOutcome::Inserted);
    EXPECT_EQ(m.put("alice", "root"), shoal::PutOutcome::Replaced);
    EXPECT_EQ(m.get("alice"), std::optional<std::string>("root"));
    EXPECT_EQ(m.get("bob"), std::nullopt);
    EXPECT_TRUE(m.contains("alice"));
    EXPECT_FALSE(m.contains("bob"));
    EXPECT_EQ(m.size(), 1u);
    EXPECT_FALSE(m.empty());
    EXPECT_EQ(m.name(), "users");
    EXPECT_EQ(store.path(), path_);
}

TEST_F(ShoalTest, InsertReplaceRemoveTake) {
    shoal::Store store(path_, small());
    shoal::Map m = store.map("m");
    EXPECT_TRUE(m.put_if_absent("k", "1"));
    EXPECT_FALSE(m.put_if_absent("k", "2"));
    EXPECT_EQ(*m.get("k"), "1");
    EXPECT_TRUE(m.put_if_present("k", "3"));
    EXPECT_FALSE(m.put_if_present("absent", "3"));
    EXPECT_FALSE(m.contains("absent"));
    EXPECT_EQ(m.take("k"), std::optional<std::string>("3"));
    EXPECT_EQ(m.take("k"), std::nullopt);
    m.put("r", "x");
    EXPECT_TRUE(m.remove("r"));
    EXPECT_FALSE(m.remove("r"));
    EXPECT_TRUE(m.empty());
}

// The former names of put_if_absent and put_if_present stay for one release, declared
// [[deprecated]] (hence the pragmas: the tests build with -Werror).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST_F(ShoalTest, FormerNamesStillWork) {
    shoal::Store store(path_, small());
    shoal::Map m = store.map("m");
    EXPECT_TRUE(m.insert("k", "1"));
    EXPECT_FALSE(m.insert("k", "2"));
    EXPECT_TRUE(m.replace("k", "3"));
    EXPECT_FALSE(m.replace("absent", "3"));
    EXPECT_EQ(*m.get("k"), "3");
    EXPECT_FALSE(m.contains("absent"));
    shoal::FixedMap f = store.fixed_map("f", 2, 2);
    EXPECT_TRUE(f.insert("ab", "12"));
    EXPECT_FALSE(f.insert("ab", "34"));
    EXPECT_TRUE(f.replace("ab", "56"));
    EXPECT_FALSE(f.replace("cd", "78"));
    EXPECT_EQ(*f.get("ab"), "56");
    EXPECT_FALSE(f.contains("cd"));
}
#pragma GCC diagnostic pop

TEST_F(ShoalTest, BytesViewInputs) {
    shoal::Store store(path_, small());
    shoal::Map m = store.map("bytes");
    const std::string with_nul("a\0b", 3);
    std::vector<std::uint8_t> vk{0, 1, 2, 255};
    std::array<std::byte, 2> ak{std::byte{7}, std::byte{0}};
    std::vector<char> vc{'v', 'c'};
    const char raw[] = {'r', 'a', 'w'};
    m.put(with_nul, "nul");
    m.put(vk, vc);
    m.put(ak, std::string_view("array"));
    m.put({raw, sizeof raw}, {raw, 2});
    m.put(std::string_view(), "");  // empty key, empty value
    EXPECT_EQ(*m.get(with_nul), "nul");
    EXPECT_EQ(*m.get(vk), "vc");
    EXPECT_EQ(*m.get(ak), "array");
    EXPECT_EQ(*m.get({raw, 3}), "ra");
    EXPECT_EQ(m.get(""), std::optional<std::string>(""));
    EXPECT_EQ(m.get("a"), std::nullopt);  // "a" is not "a\0b"
    EXPECT_EQ(m.size(), 5u);
}

TEST_F(ShoalTest, LargeValuesAndBufferReuse) {
    shoal::Store store(path_, small());
    shoal::Map m = store.map("big");
    std::string big(3u << 20, '\0');
    for (std::size_t i = 0; i < big.size(); i++) big[i] = static_cast<char>(i * 31);
    m.put("big", big);
    m.put("small", "s");
    std::string buf;
    ASSERT_TRUE(m.get_into("big", buf));
    EXPECT_EQ(buf, big);
    ASSERT_TRUE(m.get_into("small", buf));
    EXPECT_EQ(buf, "s");
    EXPECT_GE(buf.capacity(), big.size());  // the allocation is reused
    EXPECT_FALSE(m.get_into("none", buf));
    EXPECT_TRUE(buf.empty());
}

TEST_F(ShoalTest, ErrorsAreExceptionsWithCodes) {
    shoal::Options o = small();
    o.open_mode = SHOAL_OPEN_EXISTING;
    try {
        shoal::Store s(path_, o);
        FAIL() << "opened a missing store";
    } catch (const shoal::Error& e) {
        EXPECT_EQ(e.code(), SHOAL_NOT_FOUND);
        EXPECT_NE(std::string(e.what()).find("shoal_store_open"), std::string::npos);
        EXPECT_NE(std::string(e.what()).find(path_), std::string::npos);
    }
    shoal::Store store(path_, small());
    EXPECT_THROW(store.map("missing", false), shoal::Error);
    try {
        store.map(std::string(SHOAL_MAX_NAME_LEN + 1, 'n'));
        FAIL();
    } catch (const std::runtime_error& e) {  // shoal::Error is a runtime_error
        EXPECT_EQ(dynamic_cast<const shoal::Error&>(e).code(), SHOAL_INVALID);
    }
    shoal::Map m = store.map("m");
    std::string huge_key(SHOAL_MAX_KEY_LEN + 1, 'k');
    try {
        m.put(huge_key, "v");
        FAIL();
    } catch (const shoal::Error& e) {
        EXPECT_EQ(e.code(), SHOAL_INVALID);
    }
    o.open_mode = SHOAL_CREATE_NEW;
    EXPECT_THROW(shoal::Store(path_, o), shoal::Error);
}

TEST_F(ShoalTest, CallbacksAndExceptionsThroughThem) {
    shoal::Store store(path_, small());
    shoal::Map m = store.map("cb");
    m.put("k", "value");
    std::string seen;
    EXPECT_TRUE(m.visit("k", [&](std::string_view v) { seen = v; }));
    EXPECT_EQ(seen, "value");
    EXPECT_FALSE(m.visit("none", [&](std::string_view) { FAIL(); }));
    EXPECT_THROW(m.visit("k", [](std::string_view) { throw std::logic_error("mine"); }),
                 std::logic_error);

    for (int i = 0; i < 100; i++) m.put("k" + std::to_string(i), std::to_string(i));
    int n = 0;
    m.for_each([&](std::string_view, std::string_view) { n++; });
    EXPECT_EQ(n, 101);
    n = 0;
    m.for_each([&](std::string_view, std::string_view) { return ++n < 5; });
    EXPECT_EQ(n, 5);
    EXPECT_THROW(m.for_each([](std::string_view, std::string_view) { throw 42; }), int);
}

TEST_F(ShoalTest, RangeForIteration) {
    shoal::Store store(path_, small());
    shoal::Map m = store.map("iter");
    std::map<std::string, std::string> want;
    for (int i = 0; i < 2000; i++) {
        std::string k = "key" + std::to_string(i);
        std::string v(static_cast<std::size_t>(i % 300), static_cast<char>('a' + i % 26));
        m.put(k, v);
        want[k] = v;
    }
    std::map<std::string, std::string> got;
    for (const auto& [key, value] : m) {
        EXPECT_TRUE(got.emplace(key, value).second) << "twice: " << key;
    }
    EXPECT_EQ(got, want);
    std::set<std::string> keys;
    for (const std::string& k : m.keys()) keys.insert(k);
    EXPECT_EQ(keys.size(), want.size());

    shoal::Map empty = store.map("empty");
    for (const auto& e : empty) ADD_FAILURE() << "entry in an empty map: " << e.first;
}

TEST_F(ShoalTest, IteratingADroppedMapThrows) {
    shoal::Store store(path_, small());
    shoal::Map m = store.map("gone");
    for (int i = 0; i < 100; i++) m.put(std::to_string(i), "v");
    EXPECT_TRUE(store.drop_map("gone"));
    EXPECT_FALSE(store.drop_map("gone"));
    EXPECT_THROW(
        {
            for (const auto& e : m) (void)e;
        },
        shoal::Error);
    try {
        m.size();
        FAIL();
    } catch (const shoal::Error& e) {
        EXPECT_EQ(e.code(), SHOAL_NOT_FOUND);
    }
}

TEST_F(ShoalTest, StoreLevelCalls) {
    shoal::Store store(path_, small());
    {
        shoal::Map a = store.map("a");
        shoal::Map b = store.map("b");
        for (int i = 0; i < 1000; i++) a.put(std::to_string(i), std::string(100, 'x'));
        a.clear();
        EXPECT_EQ(a.size(), 0u);
        shoal_map_stats ms = b.stats();
        EXPECT_EQ(ms.entries, 0u);
        EXPECT_EQ(ms.struct_size, sizeof ms);
    }
    std::vector<std::string> names = store.maps();
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()), (std::set<std::string>{"a", "b"}));
    shoal_store_stats st = store.stats();
    EXPECT_EQ(st.maps, 2u);
    EXPECT_GT(st.dead_bytes, 0u);
    store.compact();
    shoal::CheckResult r = store.check();
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r.report.maps, 2u);
    EXPECT_TRUE(shoal::Store::destroy(path_));
    EXPECT_FALSE(shoal::Store::destroy(path_));
}

TEST_F(ShoalTest, HandlesMoveAndOutliveTheirStore) {
    std::optional<shoal::Map> keep;
    {
        shoal::Store s1(path_, small());
        shoal::Store s2 = std::move(s1);
        shoal::Map m = s2.map("m");
        m.put("k", "v");
        keep.emplace(std::move(m));
    }  // the store handle is closed here
    EXPECT_EQ(keep->get("k"), std::optional<std::string>("v"));
    keep->put("after", "close");
    EXPECT_EQ(keep->size(), 2u);
}

TEST_F(ShoalTest, ThreadsShareOneMap) {
    shoal::Store store(path_, small());
    shoal::Map m = store.map("threads");
    std::atomic<int> errors{0};
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++) {
        ts.emplace_back([&, t] {
            std::string buf;
            for (int i = 0; i < 2000; i++) {
                std::string k = std::to_string(t) + ":" + std::to_string(i);
                m.put(k, k);
                if (!m.get_into(k, buf) || buf != k) errors++;
            }
        });
    }
    for (auto& t : ts) t.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(m.size(), 8000u);
}

TEST_F(ShoalTest, MapOptionsApplyAtCreation) {
    shoal::Store store(path_, small());
    shoal::MapOptions mo;
    mo.segment_buckets = 2;
    mo.stash_buckets = 1;
    shoal::Map m = store.map("tiny", true, mo);
    for (int i = 0; i < 1000; i++) m.put(std::to_string(i), "v");
    EXPECT_GT(m.stats().splits, 0u);
    EXPECT_TRUE(store.check().ok());
}

TEST_F(ShoalTest, AtomicReadModifyWrite) {
    shoal::Store store(path_, small());
    shoal::Map m = store.map("rmw");
    EXPECT_EQ(m.swap("k", "1"), std::nullopt);
    EXPECT_EQ(m.swap("k", "2"), std::optional<std::string>("1"));
    EXPECT_FALSE(m.compare_and_swap("k", "1", "3"));
    EXPECT_TRUE(m.compare_and_swap("k", "2", "3"));
    EXPECT_FALSE(m.compare_and_swap("k", std::nullopt, "4"));
    EXPECT_TRUE(m.compare_and_swap("new", std::nullopt, "4"));
    EXPECT_TRUE(m.compare_and_swap("new", "4", std::nullopt));
    EXPECT_FALSE(m.contains("new"));
    EXPECT_EQ(m.add("n", 10), 10);
    EXPECT_EQ(m.add("n", -3), 7);
    try {
        m.add("k", 1);  // "3" is not an 8-byte integer
        FAIL();
    } catch (const shoal::Error& e) {
        EXPECT_EQ(e.code(), SHOAL_INVALID);
    }
    auto append = [](std::optional<std::string_view> cur) -> std::optional<std::string> {
        return std::string(cur.value_or("")) + "x";
    };
    EXPECT_EQ(m.update("u", append), std::optional<std::string>("x"));
    EXPECT_EQ(m.update("u", append), std::optional<std::string>("xx"));
    EXPECT_EQ(m.update("u", [](auto) -> std::optional<std::string> { return std::nullopt; }),
              std::nullopt);
    EXPECT_FALSE(m.contains("u"));
    EXPECT_THROW(m.update("u", [](auto) -> std::optional<std::string> { throw std::out_of_range("f"); }),
                 std::out_of_range);
    EXPECT_EQ(m.get_or_insert("g", "first"), "first");
    EXPECT_EQ(m.get_or_insert("g", "second"), "first");
    EXPECT_EQ(m.get_or_insert("long", std::string(1000, 'L')), std::string(1000, 'L'));
    EXPECT_EQ(m.get_or_insert("long", ""), std::string(1000, 'L'));
}

TEST_F(ShoalTest, CompareAndSwapCounterAcrossThreads) {
    shoal::Store store(path_, small());
    shoal::Map m = store.map("cas");
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++) {
        ts.emplace_back([&] {
            for (int i = 0; i < 500; i++) {
                for (;;) {
                    std::optional<std::string> cur = m.get("c");
                    std::string next = std::to_string(cur ? std::stoi(*cur) + 1 : 1);
                    std::optional<shoal::bytes_view> expected;
                    if (cur) expected = shoal::bytes_view(*cur);
                    if (m.compare_and_swap("c", expected, next)) break;
                }
                m.add("a", 1);
            }
        });
    }
    for (auto& t : ts) t.join();
    EXPECT_EQ(*m.get("c"), "2000");
    EXPECT_EQ(m.add("a", 0), 2000);
}

TEST_F(ShoalTest, Batches) {
    shoal::Store store(path_, small());
    shoal::Map m = store.map("batch");
    std::vector<std::string> ks, vs;
    for (int i = 0; i < 300; i++) {
        ks.push_back("k" + std::to_string(i));
        vs.push_back("v" + std::to_string(i));
    }
    std::vector<std::pair<shoal::bytes_view, shoal::bytes_view>> items;
    for (int i = 0; i < 300; i += 2) items.emplace_back(ks[i], vs[i]);
    m.put_many(items);
    std::vector<shoal::bytes_view> keys(ks.begin(), ks.end());
    auto got = m.get_many(keys);
    ASSERT_EQ(got.size(), 300u);
    for (int i = 0; i < 300; i++) {
        if (i % 2 == 0) {
            EXPECT_EQ(got[i], std::optional<std::string>(vs[i]));
        } else {
            EXPECT_EQ(got[i], std::nullopt);
        }
    }
    EXPECT_EQ(m.remove_many(keys), 150u);
    EXPECT_TRUE(m.empty());
    EXPECT_TRUE(m.get_many({}).empty());
}

TEST_F(ShoalTest, TimeoutHandleAndDurabilityCalls) {
    shoal::Options o = small();
    o.checksums = true;
    o.sync_writes = true;
    {
        shoal::Store store(path_, o);
        EXPECT_EQ(store.stats().checksums, 1u);
        shoal::Map m = store.map("t");
        shoal::Map fast = m.with_timeout(std::chrono::milliseconds(5));
        fast.put("k", "v");
        EXPECT_EQ(m.get("k"), std::optional<std::string>("v"));
        store.flush();
    }
    std::vector<std::string> report;
    shoal::Store again = shoal::Store::repair(path_, &report);
    EXPECT_TRUE(report.empty());
    EXPECT_EQ(again.map("t").get("k"), std::optional<std::string>("v"));
}

TEST_F(ShoalTest, BatchGroupsWritesUnderSyncWrites) {
    shoal::Options o = small();
    o.sync_writes = true;
    shoal::Store store(path_, o);
    shoal::Map m = store.map("b");
    {
        shoal::Batch outer(store);
        for (int i = 0; i < 20; i++) m.put("k" + std::to_string(i), "v");
        {
            shoal::Batch inner(store);  // ended by its destructor
            m.put("inner", "1");
        }
        outer.end();
        outer.end();  // a second end does nothing
    }
    EXPECT_EQ(m.size(), 21u);
    EXPECT_EQ(m.get("inner"), std::optional<std::string>("1"));
}

// Expects `call` to throw shoal::Error with `code`.
#define EXPECT_SHOAL_CODE(call, want)                                    \
    do {                                                                 \
        try {                                                            \
            (void)(call);                                                \
            ADD_FAILURE() << #call " did not throw";                     \
        } catch (const shoal::Error& e) {                                \
            EXPECT_EQ(e.code(), (want)) << e.what();                     \
        }                                                                \
    } while (0)

TEST_F(ShoalTest, StableUids) {
    shoal::Store store(path_, small());
    shoal::MapOptions mo;
    mo.uids = true;
    shoal::Map m = store.map("u", true, mo);
    EXPECT_TRUE(m.has_uids());
    shoal::PutOutcome o = shoal::PutOutcome::Replaced;
    shoal::Uid a = m.put_uid("alice", "admin", &o);
    EXPECT_EQ(o, shoal::PutOutcome::Inserted);
    EXPECT_NE(a.to_u64(), 0u);
    EXPECT_EQ(m.put_uid("alice", "root", &o), a);
    EXPECT_EQ(o, shoal::PutOutcome::Replaced);
    EXPECT_EQ(m.uid("alice"), std::optional<shoal::Uid>(a));
    EXPECT_EQ(m.uid("bob"), std::nullopt);
    EXPECT_EQ(m.get_by_uid(a), "root");
    std::string big(1000, 'x');
    m.put_by_uid(a, big);
    EXPECT_EQ(m.get_by_uid(a), big);
    std::string buf;
    m.get_by_uid_into(a, buf);
    EXPECT_EQ(buf, big);
    EXPECT_EQ(*m.get("alice"), big);
    std::string seen;
    m.visit_by_uid(a, [&](std::string_view v) { seen = std::string(v); });
    EXPECT_EQ(seen, big);
    EXPECT_THROW(m.visit_by_uid(a, [](std::string_view) { throw std::logic_error("x"); }),
                 std::logic_error);
    std::string long_key(300, 'k');
    shoal::Uid l = m.put_uid(long_key, "");
    EXPECT_EQ(m.key_by_uid(l), long_key);
    EXPECT_EQ(m.key_by_uid(a), "alice");
    EXPECT_EQ(m.get_by_uid(l), "");

    shoal::Uid n = m.put_uid("n", std::string(8, '\0'));
    EXPECT_EQ(m.add_by_uid(n, 5), 5);
    EXPECT_EQ(m.add_by_uid(n, -7), -2);
    EXPECT_SHOAL_CODE(m.add_by_uid(a, 1), SHOAL_INVALID);

    auto r = m.update_by_uid(l, [](std::string_view cur) {
        return std::optional<std::string>(std::string(cur) + "+");
    });
    EXPECT_EQ(r, std::optional<std::string>("+"));
    EXPECT_EQ(m.get_by_uid(l), "+");
    EXPECT_THROW(m.update_by_uid(l, [](std::string_view) -> std::optional<std::string> {
        throw std::logic_error("no");
    }),
                 std::logic_error);
    EXPECT_EQ(m.get_by_uid(l), "+");
    EXPECT_EQ(m.update_by_uid(l, [](std::string_view) { return std::optional<std::string>(); }),
              std::nullopt);
    EXPECT_FALSE(m.contains(long_key));
    EXPECT_SHOAL_CODE(m.get_by_uid(l), SHOAL_STALE_UID);

    // remove_by_uid returns the old value; the handle is stale for every call after.
    EXPECT_EQ(m.remove_by_uid(a), big);
    EXPECT_FALSE(m.contains("alice"));
    EXPECT_SHOAL_CODE(m.remove_by_uid(a), SHOAL_STALE_UID);
    EXPECT_SHOAL_CODE(m.get_by_uid(a), SHOAL_STALE_UID);
    EXPECT_SHOAL_CODE(m.key_by_uid(a), SHOAL_STALE_UID);
    EXPECT_SHOAL_CODE(m.put_by_uid(a, "x"), SHOAL_STALE_UID);
    EXPECT_SHOAL_CODE(m.add_by_uid(a, 1), SHOAL_STALE_UID);
    EXPECT_SHOAL_CODE(
        m.update_by_uid(a, [](std::string_view) { return std::optional<std::string>("x"); }),
        SHOAL_STALE_UID);
    EXPECT_SHOAL_CODE(m.visit_by_uid(a, [](std::string_view) {}), SHOAL_STALE_UID);

    // The 32-bit form, and stale-after-reuse for the 64-bit one.
    shoal::Uid e = m.put_uid("e", "echo");
    shoal::Uid e32 = shoal::Uid::from_u32(e.to_u32());
    EXPECT_EQ(m.get_by_uid(e32), "echo");
    EXPECT_TRUE(m.remove("e"));
    EXPECT_SHOAL_CODE(m.get_by_uid(e32), SHOAL_STALE_UID);
    bool reused = false;
    for (int i = 0; i < 64 && !reused; i++) {
        std::string k = "new" + std::to_string(i);
        shoal::Uid u = m.put_uid(k, k);
        if (u.to_u32() == e.to_u32()) {
            reused = true;
            EXPECT_NE(u, e);
            EXPECT_SHOAL_CODE(m.get_by_uid(e), SHOAL_STALE_UID);
            EXPECT_EQ(m.key_by_uid(e32), k);
        }
    }
    EXPECT_TRUE(reused);

    // A map without UIDs refuses; UIDs cannot be added to an existing map.
    shoal::Map plain = store.map("plain");
    EXPECT_FALSE(plain.has_uids());
    plain.put("k", "v");
    EXPECT_SHOAL_CODE(plain.uid("k"), SHOAL_INVALID);
    EXPECT_SHOAL_CODE(plain.put_uid("k", "v"), SHOAL_INVALID);
    EXPECT_SHOAL_CODE(plain.get_by_uid(shoal::Uid(1)), SHOAL_INVALID);
    EXPECT_SHOAL_CODE(plain.remove_by_uid(shoal::Uid(1)), SHOAL_INVALID);
    EXPECT_SHOAL_CODE(store.map("plain", true, mo), SHOAL_INVALID);
    EXPECT_TRUE(store.check().ok());
}

TEST_F(ShoalTest, FixedMapBasics) {
    shoal::Store store(path_, small());
    shoal::FixedMap f = store.fixed_map("counters", 8, 8);
    EXPECT_EQ(f.key_size(), 8u);
    EXPECT_EQ(f.value_size(), 8u);
    std::uint64_t k1 = 1, k2 = 2, v1 = 10, v2 = 20;
    shoal::bytes_view K1(&k1, 8), K2(&k2, 8), V1(&v1, 8), V2(&v2, 8);
    EXPECT_EQ(f.get(K1), std::nullopt);
    EXPECT_EQ(f.put(K1, V1), shoal::PutOutcome::Inserted);
    EXPECT_EQ(f.put(K1, V1), shoal::PutOutcome::Replaced);
    EXPECT_EQ(f.get(K1), std::optional<std::string>(std::string(V1.str())));
    std::uint64_t out = 0;
    EXPECT_TRUE(f.get_into(K1, &out, sizeof out));
    EXPECT_EQ(out, 10u);
    EXPECT_FALSE(f.get_into(K2, &out, sizeof out));
    EXPECT_TRUE(f.contains(K1));
    EXPECT_FALSE(f.contains(K2));
    EXPECT_FALSE(f.put_if_absent(K1, V2));
    EXPECT_FALSE(f.put_if_present(K2, V2));
    EXPECT_TRUE(f.put_if_absent(K2, V2));
    EXPECT_TRUE(f.put_if_present(K2, V1));
    EXPECT_FALSE(f.compare_and_swap(K2, V2, V1));
    EXPECT_TRUE(f.compare_and_swap(K2, V1, V2));
    EXPECT_FALSE(f.compare_and_swap(K2, std::nullopt, V1));
    EXPECT_TRUE(f.compare_and_swap(K2, V2, std::nullopt));
    EXPECT_FALSE(f.contains(K2));
    EXPECT_TRUE(f.compare_and_swap(K2, std::nullopt, V1));
    EXPECT_EQ(f.add(K1, 5), 15);
    EXPECT_EQ(f.add(K2, -20), -10);
    EXPECT_EQ(f.size(), 2u);
    EXPECT_FALSE(f.empty());
    EXPECT_TRUE(f.remove(K2));
    EXPECT_FALSE(f.remove(K2));
    EXPECT_EQ(f.swap(K2, V1), std::nullopt);
    EXPECT_EQ(f.swap(K2, V2), std::optional<std::string>(std::string(V1.str())));
    EXPECT_EQ(f.get_or_insert(K2, V1), std::string(V2.str()));
    EXPECT_EQ(f.take(K2), std::optional<std::string>(std::string(V2.str())));
    EXPECT_EQ(f.take(K2), std::nullopt);
    EXPECT_EQ(f.get_or_insert(K2, V1), std::string(V1.str()));
    EXPECT_TRUE(f.remove(K2));
    shoal_fixed_stats st = f.stats();
    EXPECT_EQ(st.entries, 1u);
    EXPECT_EQ(st.key_size, 8u);
    EXPECT_EQ(st.value_size, 8u);
    f.clear();
    EXPECT_TRUE(f.empty());
    EXPECT_NE(f.handle(), nullptr);
}

TEST_F(ShoalTest, FixedMapErrorsAndKinds) {
    shoal::Store store(path_, small());
    shoal::Map m = store.map("var");
    shoal::FixedMap f = store.fixed_map("fix", 4, 2);
    shoal::MapOptions mo;
    mo.uids = true;
    shoal::Map u = store.map("uids", true, mo);
    EXPECT_SHOAL_CODE(f.get("abc"), SHOAL_INVALID);
    EXPECT_SHOAL_CODE(f.put("abcd", "xyz"), SHOAL_INVALID);
    EXPECT_SHOAL_CODE(f.put("abc", "xy"), SHOAL_INVALID);
    EXPECT_SHOAL_CODE(f.contains("abcde"), SHOAL_INVALID);
    EXPECT_SHOAL_CODE(f.add("abcd", 1), SHOAL_INVALID);  // values are not 8 bytes
    char small_buf[1];
    EXPECT_SHOAL_CODE(f.get_into("abcd", small_buf, 1), SHOAL_INVALID);
    EXPECT_SHOAL_CODE(store.fixed_map("absent", 4, 2, false), SHOAL_NOT_FOUND);
    EXPECT_SHOAL_CODE(store.fixed_map("fix", 4, 3), SHOAL_INVALID);
    EXPECT_SHOAL_CODE(store.fixed_map("var", 4, 2), SHOAL_INVALID);
    EXPECT_SHOAL_CODE(store.map("fix"), SHOAL_INVALID);
    auto k = store.map_kind("fix");
    ASSERT_TRUE(k.has_value());
    EXPECT_TRUE(k->fixed());
    EXPECT_EQ(k->key_size, 4u);
    EXPECT_EQ(k->value_size, 2u);
    k = store.map_kind("var");
    ASSERT_TRUE(k.has_value());
    EXPECT_EQ(k->kind, SHOAL_MAP_KIND_VARIABLE);
    EXPECT_FALSE(k->fixed());
    k = store.map_kind("uids");
    ASSERT_TRUE(k.has_value());
    EXPECT_EQ(k->kind, SHOAL_MAP_KIND_VARIABLE_UIDS);
    EXPECT_EQ(store.map_kind("absent"), std::nullopt);
    // A second handle, without create; the first stays usable after a move.
    shoal::FixedMap g = store.fixed_map("fix", 4, 2, false);
    g.put("abcd", "xy");
    shoal::FixedMap moved = std::move(f);
    EXPECT_EQ(moved.get("abcd"), std::optional<std::string>("xy"));
}

TEST_F(ShoalTest, FixedMapIteration) {
    shoal::Store store(path_, small());
    shoal::FixedMap f = store.fixed_map("it", 4, 4);
    std::map<std::string, std::string> want;
    for (std::uint32_t i = 0; i < 500; i++) {
        std::string k(reinterpret_cast<const char*>(&i), 4);
        std::uint32_t v = i * 7;
        std::string vs(reinterpret_cast<const char*>(&v), 4);
        f.put(k, vs);
        want[k] = vs;
    }
    std::map<std::string, std::string> got;
    for (const auto& kv : f) got.emplace(kv.first, kv.second);
    EXPECT_EQ(got, want);
    shoal::FixedMap empty = store.fixed_map("empty", 1, 0);
    int n = 0;
    for (const auto& kv : empty) {
        (void)kv;
        n++;
    }
    EXPECT_EQ(n, 0);
    empty.put("a", shoal::bytes_view());
    for (const auto& kv : empty) {
        EXPECT_EQ(kv.first, "a");
        EXPECT_EQ(kv.second, "");
        n++;
    }
    EXPECT_EQ(n, 1);
}

// A u64 as 8 bytes, and back.
std::string u64s(std::uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }
std::uint64_t u64of(std::string_view s) {
    std::uint64_t v = 0;
    if (s.size() == 8) std::memcpy(&v, s.data(), 8);
    return v;
}

TEST_F(ShoalTest, FixedMapOptionsApplyAtCreation) {
    shoal::Store store(path_, small());
    shoal::FixedOptions fo;
    fo.segment_buckets = 2;
    fo.stash_buckets = 1;
    shoal::FixedMap tiny = store.fixed_map("tiny", 8, 8, true, fo);
    shoal::FixedMap dflt = store.fixed_map("dflt", 8, 8);
    for (std::uint64_t i = 0; i < 2000; i++) {
        tiny.put(u64s(i), u64s(i * 2));
        dflt.put(u64s(i), u64s(i * 2));
    }
    shoal_fixed_stats t = tiny.stats(), d = dflt.stats();
    EXPECT_EQ(t.entries, 2000u);
    EXPECT_GT(t.splits, 0u);
    EXPECT_EQ(t.capacity, t.segments * 3 * t.cells_per_bucket);
    EXPECT_GT(t.segments, d.segments);
    EXPECT_GT(d.capacity / d.segments / d.cells_per_bucket, 8u);
    EXPECT_EQ(u64of(*tiny.get(u64s(1999))), 3998u);
    // Reopened with other options, the map keeps its own.
    shoal::FixedOptions other;
    other.segment_buckets = 64;
    shoal::FixedMap again = store.fixed_map("tiny", 8, 8, false, other);
    shoal_fixed_stats a = again.stats();
    EXPECT_EQ(a.capacity, a.segments * 3 * a.cells_per_bucket);
    // Out-of-range options are refused, and nothing is created.
    shoal::FixedOptions bad;
    bad.segment_buckets = 4097;
    EXPECT_SHOAL_CODE(store.fixed_map("bad", 8, 8, true, bad), SHOAL_INVALID);
    bad.segment_buckets = 0;
    bad.stash_buckets = 1025;
    EXPECT_SHOAL_CODE(store.fixed_map("bad", 8, 8, true, bad), SHOAL_INVALID);
    EXPECT_EQ(store.map_kind("bad"), std::nullopt);
    EXPECT_SHOAL_CODE(store.fixed_map("absent", 8, 8, false, fo), SHOAL_NOT_FOUND);
    EXPECT_TRUE(store.check().ok());
}

TEST_F(ShoalTest, FixedMapUpdate) {
    shoal::Store store(path_, small());
    shoal::FixedMap f = store.fixed_map("u", 4, 8);
    auto incr = [](std::optional<std::string_view> cur) -> std::optional<std::string> {
        return u64s(cur ? u64of(*cur) + 1 : 100);
    };
    EXPECT_EQ(f.update("key1", incr), std::optional<std::string>(u64s(100)));
    EXPECT_EQ(f.update("key1", incr), std::optional<std::string>(u64s(101)));
    EXPECT_EQ(u64of(*f.get("key1")), 101u);
    // The callback sees absence as nullopt.
    bool saw_absent = false;
    f.update("key2", [&](std::optional<std::string_view> cur) -> std::optional<std::string> {
        saw_absent = !cur.has_value();
        return std::nullopt;
    });
    EXPECT_TRUE(saw_absent);
    EXPECT_FALSE(f.contains("key2"));
    // A value of another size: SHOAL_INVALID, nothing changed.
    EXPECT_SHOAL_CODE(f.update("key1", [](auto) -> std::optional<std::string> { return "short"; }),
                      SHOAL_INVALID);
    EXPECT_EQ(u64of(*f.get("key1")), 101u);
    // A key of another size.
    EXPECT_SHOAL_CODE(f.update("k", incr), SHOAL_INVALID);
    // An exception from the callback cancels the update and is rethrown.
    EXPECT_THROW(f.update("key1", [](auto) -> std::optional<std::string> { throw std::out_of_range("f"); }),
                 std::out_of_range);
    EXPECT_EQ(u64of(*f.get("key1")), 101u);
    // Remove through update.
    EXPECT_EQ(f.update("key1", [](auto) -> std::optional<std::string> { return std::nullopt; }),
              std::nullopt);
    EXPECT_FALSE(f.contains("key1"));
    // Threads incrementing one key: no increment is lost.
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; t++) {
        ts.emplace_back([&] {
            for (int i = 0; i < 500; i++) f.update("hot!", incr);
        });
    }
    for (auto& t : ts) t.join();
    EXPECT_EQ(u64of(*f.get("hot!")), 100u + 1999u);
}

TEST_F(ShoalTest, TransactionsOverVariableAndMixedMaps) {
    shoal::Store store(path_, small());
    shoal::MapOptions mo;
    mo.uids = true;
    shoal::Map v = store.map("names", true, mo);
    shoal::FixedMap f = store.fixed_map("acct", 4, 8);
    v.put("alice", u64s(100));
    f.put("bbbb", u64s(0));
    std::string big(5000, 'b');
    v.put("big", big);
    // A transfer from a variable map's key to a fixed map's, a long value beside it.
    shoal::TxnOutcome out = store.transaction()
                                .when_int(v, "alice", shoal::IntCmp::Ge, 40)
                                .when_present(f, "bbbb")
                                .then_add(v, "alice", -40)
                                .then_add(f, "bbbb", 40)
                                .then_put(v, "note", std::string(300, 'n'))
                                .commit();
    EXPECT_TRUE(out.succeeded);
    ASSERT_EQ(out.results.size(), 3u);
    EXPECT_EQ(u64of(*out.results[0].old), 100u);
    EXPECT_EQ(u64of(*out.results[1].old), 0u);
    EXPECT_FALSE(out.results[2].old.has_value());
    EXPECT_EQ(u64of(*v.get("alice")), 60u);
    EXPECT_EQ(u64of(*f.get("bbbb")), 40u);
    EXPECT_EQ(*v.get("note"), std::string(300, 'n'));
    // The version condition holds once, then the put has moved it.
    std::uint64_t ver = *v.version("alice");
    EXPECT_FALSE(v.version("nobody").has_value());
    auto bump = [&] {
        return store.transaction().when_version(v, "alice", ver).then_put(v, "alice", u64s(1)).commit();
    };
    EXPECT_TRUE(bump().succeeded);
    EXPECT_FALSE(bump().succeeded);
    // An old value past old_capacity: committed, reported as too long, not returned.
    out = store.transaction().then_put(v, "big", "small").then_get(v, "note").old_capacity(1000).commit();
    EXPECT_TRUE(out.succeeded);
    EXPECT_TRUE(out.results[0].old_too_long);
    EXPECT_FALSE(out.results[0].old.has_value());
    EXPECT_EQ(*out.results[1].old, std::string(300, 'n'));
    EXPECT_EQ(*v.get("big"), "small");
    // A version condition on a fixed map is refused.
    EXPECT_SHOAL_CODE(store.transaction().when_version(f, "bbbb", 1).then_remove(f, "bbbb").commit(),
                      SHOAL_INVALID);
    // A snapshot over both kinds, by reference and by pointer.
    auto vals = store.snapshot_get({{v, "alice"}, {&f, "bbbb"}, {&v, "nobody"}});
    ASSERT_EQ(vals.size(), 3u);
    EXPECT_EQ(u64of(*vals[0]), 1u);
    EXPECT_EQ(u64of(*vals[1]), 40u);
    EXPECT_FALSE(vals[2].has_value());
}

TEST_F(ShoalTest, TransactionsAndSnapshots) {
    shoal::Store store(path_, small());
    shoal::FixedMap f = store.fixed_map("acct", 4, 8);
    f.put("aaaa", u64s(100));
    f.put("bbbb", u64s(5));
    // A transfer whose condition holds: the then-list runs, each result reported.
    shoal::TxnOutcome out = store.transaction()
                                .when_int(f, "aaaa", shoal::IntCmp::Ge, 30)
                                .when_absent(f, "cccc")
                                .then_add(f, "aaaa", -30)
                                .then_add(f, "bbbb", 30)
                                .then_put_if_absent(f, "cccc", u64s(7))
                                .then_get(f, "dddd")
                                .else_put(f, "eeee", u64s(1))
                                .commit();
    EXPECT_TRUE(out.succeeded);
    ASSERT_EQ(out.results.size(), 4u);
    EXPECT_TRUE(out.results[0].applied);
    EXPECT_EQ(u64of(*out.results[0].old), 100u);
    EXPECT_EQ(u64of(*out.results[1].old), 5u);
    EXPECT_TRUE(out.results[2].applied);
    EXPECT_FALSE(out.results[2].old.has_value());
    EXPECT_FALSE(out.results[3].applied);
    EXPECT_EQ(u64of(*f.get("aaaa")), 70u);
    EXPECT_EQ(u64of(*f.get("bbbb")), 35u);
    EXPECT_EQ(u64of(*f.get("cccc")), 7u);
    EXPECT_FALSE(f.contains("eeee"));
    // A condition that fails: the else-list runs instead.
    out = store.transaction()
              .when_equals(f, "aaaa", u64s(1))
              .then_remove(f, "aaaa")
              .else_remove(f, "cccc")
              .else_put_if_present(f, "bbbb", u64s(36))
              .commit();
    EXPECT_FALSE(out.succeeded);
    ASSERT_EQ(out.results.size(), 2u);
    EXPECT_TRUE(out.results[0].applied);
    EXPECT_TRUE(out.results[1].applied);
    EXPECT_TRUE(f.contains("aaaa"));
    EXPECT_FALSE(f.contains("cccc"));
    // Bad arguments: SHOAL_INVALID, nothing changed.
    EXPECT_SHOAL_CODE(store.transaction().then_put(f, "aaaa", "short").commit(), SHOAL_INVALID);
    EXPECT_SHOAL_CODE(
        store.transaction().then_put(f, "bbbb", u64s(1)).then_remove(f, "bbbb").commit(),
        SHOAL_INVALID);
    EXPECT_EQ(u64of(*f.get("bbbb")), 36u);
    // Snapshots: every value as of one instant, absent keys as nullopt.
    auto vals = store.snapshot_get({{&f, "aaaa"}, {&f, "bbbb"}, {&f, "cccc"}});
    ASSERT_EQ(vals.size(), 3u);
    EXPECT_EQ(u64of(*vals[0]), 70u);
    EXPECT_EQ(u64of(*vals[1]), 36u);
    EXPECT_FALSE(vals[2].has_value());
    EXPECT_SHOAL_CODE(store.snapshot_get({{&f, "toolong"}}), SHOAL_INVALID);
    // Threads transferring while another takes snapshots: the sum never changes.
    f.put("aaaa", u64s(1000));
    f.put("bbbb", u64s(1000));
    std::vector<std::thread> ts;
    for (int t = 0; t < 2; t++) {
        ts.emplace_back([&, t] {
            for (int i = 0; i < 2000; i++) {
                const char* from = t ? "aaaa" : "bbbb";
                const char* to = t ? "bbbb" : "aaaa";
                store.transaction()
                    .when_int(f, from, shoal::IntCmp::Ge, 3)
                    .then_add(f, from, -3)
                    .then_add(f, to, 3)
                    .commit();
            }
        });
    }
    for (int i = 0; i < 2000; i++) {
        auto v = store.snapshot_get({{&f, "aaaa"}, {&f, "bbbb"}});
        ASSERT_EQ(u64of(*v[0]) + u64of(*v[1]), 2000u);
    }
    for (auto& t : ts) t.join();
    EXPECT_EQ(u64of(*f.get("aaaa")) + u64of(*f.get("bbbb")), 2000u);
}

// Store::backup while another thread commits transfers between two maps (a chunk apart in
// the file): the copy opens, passes check, and holds one instant's pair of accounts.
TEST_F(ShoalTest, HotBackupWhileAThreadWrites) {
    const std::string copy = path_ + ".copy";
    unlink(copy.c_str());
    shoal::Store store(path_, small());
    shoal::FixedMap fa = store.fixed_map("a", 4, 8);
    shoal::FixedMap fb = store.fixed_map("b", 4, 8);
    fa.put("aaaa", u64s(1000000));
    fb.put("bbbb", u64s(1000000));
    store.map("m").put("k", "v");
    std::atomic<bool> stop{false};
    std::atomic<long> commits{0};
    std::thread writer([&] {
        while (!stop.load()) {
            store.transaction().then_add(fa, "aaaa", -3).then_add(fb, "bbbb", 3).commit();
            commits++;
        }
    });
    for (int i = 0; i < 10000 && commits.load() < 100; i++) usleep(1000);
    std::uint64_t n = store.backup(copy);
    stop = true;
    writer.join();
    EXPECT_GT(n, 0u);
    EXPECT_GT(commits.load(), 0);
    EXPECT_SHOAL_CODE(store.backup(copy), SHOAL_EXISTS);
    {
        shoal::Store c(copy);
        EXPECT_TRUE(c.check().ok());
        EXPECT_EQ(*c.map("m", false).get("k"), "v");
        std::uint64_t a = u64of(*c.fixed_map("a", 4, 8, false).get("aaaa"));
        std::uint64_t b = u64of(*c.fixed_map("b", 4, 8, false).get("bbbb"));
        EXPECT_EQ(a + b, 2000000u);
        EXPECT_LT(a, 1000000u);
    }
    shoal::Store::destroy(copy);
}

TEST_F(ShoalTest, FixedMapBatches) {
    shoal::Store store(path_, small());
    shoal::FixedMap f = store.fixed_map("batch", 8, 8);
    std::vector<std::string> ks, vs;
    for (std::uint64_t i = 0; i < 300; i++) {
        ks.push_back(u64s(i));
        vs.push_back(u64s(i * 7));
    }
    std::vector<std::pair<shoal::bytes_view, shoal::bytes_view>> items;
    for (int i = 0; i < 300; i += 2) items.emplace_back(ks[i], vs[i]);
    f.put_many(items);
    EXPECT_EQ(f.size(), 150u);
    std::vector<shoal::bytes_view> keys(ks.begin(), ks.end());
    auto got = f.get_many(keys);
    ASSERT_EQ(got.size(), 300u);
    for (int i = 0; i < 300; i++) {
        if (i % 2 == 0) {
            EXPECT_EQ(got[i], std::optional<std::string>(vs[i]));
        } else {
            EXPECT_EQ(got[i], std::nullopt);
        }
    }
    EXPECT_TRUE(f.get_many({}).empty());
    f.put_many({});
    // Wrong sizes: refused before anything is written or removed.
    EXPECT_SHOAL_CODE(f.get_many({ks[0], "short"}), SHOAL_INVALID);
    EXPECT_SHOAL_CODE(f.put_many({{ks[1], vs[1]}, {ks[3], "short"}}), SHOAL_INVALID);
    EXPECT_FALSE(f.contains(ks[1]));
    EXPECT_SHOAL_CODE(f.remove_many({ks[0], "short"}), SHOAL_INVALID);
    EXPECT_TRUE(f.contains(ks[0]));
    EXPECT_EQ(f.remove_many(keys), 150u);
    EXPECT_TRUE(f.empty());
    EXPECT_EQ(f.remove_many(keys), 0u);
}

TEST_F(ShoalTest, FixedMapWithTimeout) {
    shoal::Store store(path_, small());
    std::optional<shoal::FixedMap> f(store.fixed_map("t", 4, 2));
    shoal::FixedMap fast = f->with_timeout(std::chrono::milliseconds(5));
    EXPECT_EQ(fast.key_size(), 4u);
    EXPECT_EQ(fast.value_size(), 2u);
    fast.put("abcd", "xy");
    EXPECT_EQ(f->get("abcd"), std::optional<std::string>("xy"));  // the same map
    f.reset();  // the handles are independent
    EXPECT_EQ(fast.get("abcd"), std::optional<std::string>("xy"));
    EXPECT_EQ(fast.update("abcd", [](auto) -> std::optional<std::string> { return "zz"; }),
              std::optional<std::string>("zz"));
    EXPECT_NE(fast.handle(), nullptr);
}

TEST_F(ShoalTest, QueueElementsAreHeldByRaiiGuards) {
    shoal::Store store(path_, small());
    shoal::QueueOptions o;
    o.element_size = 64;
    o.elements = 4;
    o.queues = {{"work", 0}, {"done", 1}};
    shoal::QueueSet qs(store, "jobs", o);
    const std::uint32_t free_q = qs.queue("free"), work = qs.queue("work"),
                        done = qs.queue("done");
    EXPECT_EQ(qs.size(free_q), 4u);
    {
        std::optional<shoal::Element> e = qs.pull(free_q);
        ASSERT_TRUE(e.has_value());
        EXPECT_EQ(e->size(), 64u);
        std::memcpy(e->data(), "job", 3);
        qs.push(work, std::move(*e));
    }
    EXPECT_EQ(qs.size(work), 1u);
    {
        // Dropped without a push: back where it came from.
        std::optional<shoal::Element> e = qs.pull(work, std::chrono::milliseconds(1000));
        ASSERT_TRUE(e.has_value());
        EXPECT_EQ(std::memcmp(e->data(), "job", 3), 0);
        EXPECT_EQ(e->from(), work);
    }
    EXPECT_EQ(qs.size(work), 1u);
    std::vector<shoal::Element> two = qs.pull_many(free_q, 2);
    ASSERT_EQ(two.size(), 2u);
    try {
        qs.push_many(done, two);
        FAIL() << "a push past the depth limit succeeded";
    } catch (const shoal::Error& e) {
        EXPECT_EQ(e.code(), SHOAL_QUEUE_FULL);
    }
    EXPECT_EQ(two.size(), 2u);  // still held, by the guards
    qs.push_many(work, two);
    EXPECT_TRUE(two.empty());
    EXPECT_EQ(qs.size(work), 3u);
    EXPECT_EQ(qs.move(work, done, 5), 1u);
    EXPECT_EQ(qs.reclaim(), 0u);
    shoal::QueueSet again(store, "jobs");
    EXPECT_EQ(again.size(done), 1u);
    try {
        shoal::QueueSet none(store, "none");
        FAIL() << "opened a queue set that does not exist";
    } catch (const shoal::Error& e) {
        EXPECT_EQ(e.code(), SHOAL_NOT_FOUND);
    }
}

}  // namespace
