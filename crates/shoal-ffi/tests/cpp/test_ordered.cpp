// GoogleTest tests of the C++ wrapper's ordered maps: point calls against std::map,
// range-for over ranges in both directions, snapshots, and transactions that commit,
// abort on request, and abort when an exception leaves their scope.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "shoal.hpp"

namespace {

class OrderedTest : public ::testing::Test {
protected:
    void SetUp() override {
        const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = std::string("/tmp/shoal-gtest-ord-") + std::to_string(getpid()) + "-" +
                t->name() + ".shoal";
        shoal::Store::destroy(path_);
        opts_.max_size = 256u << 20;
    }
    void TearDown() override { shoal::Store::destroy(path_); }
    std::string path_;
    shoal::Options opts_;
};

using Ref = std::map<std::string, std::string>;

std::vector<std::pair<std::string, std::string>> collect(shoal::OrderedRange r) {
    std::vector<std::pair<std::string, std::string>> out;
    for (auto [k, v] : r) out.emplace_back(std::string(k), std::string(v));
    return out;
}

TEST_F(OrderedTest, PointCallsAndRangesMatchStdMap) {
    shoal::Store store(path_, opts_);
    shoal::OrderedMap m = store.ordered_map("o");
    EXPECT_THROW(store.ordered_map("absent", false), shoal::Error);
    EXPECT_EQ(shoal::OrderedMap::names(store), std::vector<std::string>{"o"});
    EXPECT_TRUE(store.map_kind("o")->ordered());
    Ref ref;
    std::mt19937 rng(7);
    for (int i = 0; i < 5000; i++) {
        std::string k = "k" + std::to_string(rng() % 1500);
        std::string v = "v" + std::to_string(rng());
        switch (rng() % 4) {
            case 0:
                m.put(k, v);
                ref[k] = v;
                break;
            case 1:
                EXPECT_EQ(m.insert(k, v), ref.emplace(k, v).second);
                break;
            case 2: {
                bool had = ref.count(k) != 0;
                EXPECT_EQ(m.replace(k, v), had);
                if (had) ref[k] = v;
                break;
            }
            default:
                EXPECT_EQ(m.remove(k), ref.erase(k) == 1);
        }
    }
    EXPECT_EQ(m.size(), ref.size());
    for (auto& [k, v] : ref) EXPECT_EQ(m.get(k), v);
    EXPECT_FALSE(m.contains("nope"));

    // Everything, both ways.
    std::vector<std::pair<std::string, std::string>> all(ref.begin(), ref.end());
    EXPECT_EQ(collect(m.range()), all);
    std::reverse(all.begin(), all.end());
    EXPECT_EQ(collect(m.range(std::nullopt, std::nullopt, true)), all);

    // Bounded ranges and counts.
    for (auto [lo, hi] : std::vector<std::pair<std::string, std::string>>{
             {"k1", "k2"}, {"k3", "k4"}, {"k", "k9999"}, {"k5", "k5"}, {"k7", "k1"}}) {
        Ref::iterator a = ref.lower_bound(lo), b = ref.lower_bound(hi);
        std::vector<std::pair<std::string, std::string>> want;
        if (lo < hi) want.assign(a, b);
        EXPECT_EQ(collect(m.range(lo, hi)), want) << lo << ".." << hi;
        EXPECT_EQ(m.count_range(lo, hi), want.size());
        std::reverse(want.begin(), want.end());
        EXPECT_EQ(collect(m.range(lo, hi, true)), want) << lo << ".." << hi << " reversed";
    }

    // Too large a key is an error, not a crash.
    try {
        m.put(std::string(SHOAL_MAX_ORDERED_KEY + 1, 'x'), "v");
        ADD_FAILURE() << "no error";
    } catch (const shoal::Error& e) {
        EXPECT_EQ(e.code(), SHOAL_INVALID);
    }
}

TEST_F(OrderedTest, SnapshotKeepsItsView) {
    shoal::Store store(path_, opts_);
    shoal::OrderedMap m = store.ordered_map("o");
    m.put("a", "1");
    m.put("b", "2");
    shoal::OrderedSnapshot snap = m.snapshot();
    m.put("a", "changed");
    m.remove("b");
    m.put("c", "3");
    EXPECT_EQ(snap.get("a"), "1");
    EXPECT_TRUE(snap.contains("b"));
    EXPECT_FALSE(snap.contains("c"));
    EXPECT_EQ(snap.size(), 2u);
    EXPECT_EQ(snap.count_range("b"), 1u);
    auto all = collect(snap.range());
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[1].first, "b");
    EXPECT_EQ(m.get("a"), "changed");
    // A snapshot belongs to its thread.
    std::thread([&] {
        try {
            snap.get("a");
            ADD_FAILURE() << "another thread read the snapshot";
        } catch (const shoal::Error& e) {
            EXPECT_EQ(e.code(), SHOAL_INVALID);
        }
    }).join();
}

TEST_F(OrderedTest, TransactionsCommitOrAbort) {
    shoal::Store store(path_, opts_);
    shoal::OrderedMap a = store.ordered_map("a");
    shoal::OrderedMap b = store.ordered_map("b");
    {
        shoal::OrderedTxn t = shoal::OrderedMap::write_many({&a, &b});
        t.put(a, "x", "1");
        t.put(b, "y", "2");
        EXPECT_EQ(t.get(a, "x"), "1");
        EXPECT_FALSE(a.contains("x"));  // not committed yet
        EXPECT_GT(t.commit(), 0u);
        EXPECT_FALSE(t.active());
        EXPECT_THROW(t.put(a, "z", "3"), shoal::Error);
    }
    EXPECT_EQ(a.get("x"), "1");
    EXPECT_EQ(b.get("y"), "2");

    // An exception leaving the scope aborts.
    try {
        shoal::OrderedTxn t = a.write();
        t.put("x", "lost");
        EXPECT_TRUE(t.remove("x"));
        t.put("w", "lost");
        throw std::runtime_error("boom");
    } catch (const std::runtime_error&) {
    }
    EXPECT_EQ(a.get("x"), "1");
    EXPECT_FALSE(a.contains("w"));
    {
        shoal::OrderedTxn t = a.write();
        t.put("w", "dropped");
        t.abort();
    }
    EXPECT_FALSE(a.contains("w"));

    // The lock was released each time: another write goes through.
    {
        shoal::OrderedTxn t = a.write();
        EXPECT_FALSE(t.insert("x", "2"));
        EXPECT_TRUE(t.replace("x", "3"));
        t.commit();
    }
    EXPECT_EQ(a.get("x"), "3");

    // Snapshots of both maps as of one commit.
    auto snaps = shoal::OrderedMap::snapshot_many({&a, &b});
    ASSERT_EQ(snaps.size(), 2u);
    EXPECT_EQ(snaps[0].sequence(), snaps[1].sequence());
    EXPECT_EQ(snaps[1].get("y"), "2");
}

}  // namespace

TEST_F(OrderedTest, CompareAndSwapRangesAppendsSequencesAndValues) {
    shoal::Store store(path_, opts_);
    shoal::OrderedMap m = store.ordered_map("more");
    EXPECT_TRUE(m.compare_and_swap("k", std::nullopt, std::string_view("1")));
    EXPECT_FALSE(m.compare_and_swap("k", std::string_view("2"), std::string_view("3")));
    EXPECT_TRUE(m.compare_and_swap("k", std::string_view("1"), std::nullopt));
    EXPECT_FALSE(m.contains("k"));

    shoal::OrderedTxn t = m.write();
    for (int i = 0; i < 500; i++) {
        char k[16];
        std::snprintf(k, sizeof k, "a%05d", i);
        t.append(m, k, "v");
    }
    EXPECT_THROW(t.append(m, "a00000", "v"), shoal::Error);
    EXPECT_EQ(t.next_sequence(m, 5), 0u);
    t.set_marker(2, 99);
    t.commit();
    EXPECT_EQ(m.size(), 500u);
    EXPECT_EQ(m.sequence(), 5u);
    EXPECT_EQ(m.remove_range(std::string_view("a00100"), std::string_view("a00200")), 100u);
    EXPECT_EQ(m.size(), 400u);
    EXPECT_EQ(m.values("a00000"), std::vector<std::string>{"v"});
    std::uint64_t mark = 0;
    ASSERT_EQ(shoal_store_ordered_marker(store.handle(), 2, &mark), SHOAL_OK);
    EXPECT_EQ(mark, 99u);
}

namespace {

std::string u64key(std::uint64_t n) { return std::string(reinterpret_cast<const char*>(&n), 8); }

TEST_F(OrderedTest, CursorsWalkBothWaysAndAmongValues) {
    shoal::Store store(path_, opts_);
    shoal::OrderedMap ints(store, "ints", true, SHOAL_ORDERED_U64_KEYS);
    for (std::uint64_t i = 0; i < 200; i++) ints.put(u64key(i * 10), std::to_string(i));
    shoal::OrderedSnapshot snap = ints.snapshot();
    shoal::OrderedCursor c = snap.cursor();
    EXPECT_FALSE(c.entry().has_value());
    EXPECT_TRUE(c.seek_ge(u64key(15)));
    EXPECT_EQ(c.value(), "2");
    EXPECT_EQ(c.position(), std::optional<std::uint64_t>(2));
    EXPECT_TRUE(c.seek_le(u64key(15)));
    EXPECT_EQ(c.value(), "1");
    EXPECT_FALSE(c.seek(u64key(15)));
    EXPECT_FALSE(c.position().has_value());
    // A full walk forwards and backwards sees every key in numeric order.
    std::vector<std::string> fwd, back;
    for (bool on = c.first(); on; on = c.next()) fwd.emplace_back(c.value());
    for (bool on = c.last(); on; on = c.prev()) back.emplace_back(c.value());
    ASSERT_EQ(fwd.size(), 200u);
    std::reverse(back.begin(), back.end());
    EXPECT_EQ(fwd, back);
    EXPECT_EQ(fwd[199], "199");
    EXPECT_THROW(c.next_key(), shoal::Error);  // not a multimap

    shoal::OrderedMap multi(store, "multi", true, SHOAL_ORDERED_DUPS);
    for (const char* kv : {"kb", "ka", "jz", "kc", "mx"}) multi.put(std::string(1, kv[0]), std::string(1, kv[1]));
    shoal::OrderedCursor m = multi.snapshot().cursor();  // outlives its snapshot object
    ASSERT_TRUE(m.seek("k"));
    EXPECT_EQ(m.value(), "a");
    EXPECT_EQ(m.count_values(), 3u);
    EXPECT_TRUE(m.next_value());
    EXPECT_TRUE(m.next_value());
    EXPECT_FALSE(m.next_value());
    EXPECT_EQ(m.value(), "c");
    EXPECT_TRUE(m.next_key());
    EXPECT_EQ(m.key(), "m");
    EXPECT_TRUE(m.prev_key());
    EXPECT_EQ(m.value(), "c");
    EXPECT_TRUE(m.seek_value("k", "bb", true));
    EXPECT_EQ(m.value(), "c");
    EXPECT_FALSE(m.seek_value("k", "bb"));
    EXPECT_TRUE(multi.remove_value("k", "b"));
    EXPECT_FALSE(multi.remove_value("k", "b"));
    {
        shoal::OrderedTxn t = multi.write();
        EXPECT_TRUE(t.remove_value(multi, "k", "a"));
        t.commit();
    }
    EXPECT_EQ(multi.values("k"), std::vector<std::string>{"c"});
}

TEST_F(OrderedTest, NestedTransactionsRollBackOnException) {
    shoal::Store store(path_, opts_);
    shoal::OrderedMap m = store.ordered_map("n");
    {
        shoal::OrderedTxn t = m.write();
        t.put("a", "1");
        try {
            auto n = t.nested();
            t.put("b", "2");
            t.remove("a");
            throw std::runtime_error("undo the nested writes");
        } catch (const std::runtime_error&) {
        }
        EXPECT_TRUE(t.get("a").has_value());
        EXPECT_FALSE(t.get("b").has_value());
        {
            auto n = t.nested();
            t.put("c", "3");
            {
                auto inner = t.nested();
                t.put("d", "4");
                inner.commit();
            }
            EXPECT_THROW(t.commit(), shoal::Error);  // n is still open
            EXPECT_TRUE(t.active());
            n.commit();
            EXPECT_FALSE(n.active());
            EXPECT_THROW(n.commit(), shoal::Error);
        }
        t.commit();
    }
    EXPECT_EQ(m.size(), 3u);
    EXPECT_FALSE(m.contains("b"));
    EXPECT_EQ(m.get("d"), std::optional<std::string>("4"));
    {
        // A nested commit is undone by the parent's abort (here, its destructor).
        shoal::OrderedTxn t = m.write();
        auto n = t.nested();
        t.put("e", "5");
        n.commit();
    }
    EXPECT_FALSE(m.contains("e"));
}

TEST_F(OrderedTest, CursorsOfAWriteTransactionSeeItsWritesAndWriteAtThemselves) {
    shoal::Store store(path_, opts_);
    shoal::OrderedMap m = store.ordered_map("w");
    for (const char* k : {"a", "b", "c", "d"}) m.put(k, "old");
    {
        shoal::OrderedTxn t = m.write();
        t.remove("b");
        t.put("bb", "new");
        shoal::OrderedCursor c = t.cursor();
        std::vector<std::string> keys;
        for (bool on = c.first(); on; on = c.next()) keys.emplace_back(c.key());
        EXPECT_EQ(keys, (std::vector<std::string>{"a", "bb", "c", "d"}));
        ASSERT_TRUE(c.seek("c"));
        EXPECT_EQ(c.position(), std::optional<std::uint64_t>(2));
        EXPECT_TRUE(c.put_current("set"));
        EXPECT_EQ(t.get("c"), std::optional<std::string>("set"));
        EXPECT_TRUE(c.remove_current());
        EXPECT_FALSE(c.entry().has_value());  // in the gap c left
        EXPECT_TRUE(c.prev());
        EXPECT_EQ(c.key(), "bb");
        // A write through the transaction shows at the cursor.
        t.put("bb", "again");
        EXPECT_EQ(c.value(), "again");
        {
            auto n = t.nested();
            t.remove("bb");
            EXPECT_FALSE(c.entry().has_value());
        }  // aborted: bb is back, and the cursor still in the gap the removal left
        EXPECT_FALSE(c.entry().has_value());
        EXPECT_TRUE(c.next());
        EXPECT_EQ(c.value(), "again");
        t.commit();
        EXPECT_THROW(c.first(), shoal::Error);  // the transaction is over
    }
    EXPECT_EQ(m.size(), 3u);
    EXPECT_FALSE(m.contains("c"));
    EXPECT_EQ(m.get("bb"), std::optional<std::string>("again"));
    // A snapshot's cursor does not write.
    shoal::OrderedCursor s = m.snapshot().cursor();
    ASSERT_TRUE(s.first());
    EXPECT_THROW(s.remove_current(), shoal::Error);
}

}  // namespace
