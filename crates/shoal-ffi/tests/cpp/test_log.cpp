// GoogleTest tests of the C++ wrapper's logs: appends with levels and fields in the three
// forms (append, printf, stream), the full-ring policies, clear errors, a named cursor
// that outlives its process, threads streaming records that all come out in order, and
// batch reads.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "shoal.hpp"

namespace {

using namespace std::chrono_literals;

class LogTest : public ::testing::Test {
protected:
    void SetUp() override {
        const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = std::string("/tmp/shoal-gtest-log-") + std::to_string(getpid()) + "-" +
                t->name() + ".shoal";
        shoal::Store::destroy(path_);
        opts_.max_size = 256u << 20;
    }
    void TearDown() override { shoal::Store::destroy(path_); }
    std::string path_;
    shoal::Options opts_;
};

shoal::LogOptions geometry(std::uint64_t slots, std::size_t max_record,
                           shoal::LogPolicy policy = shoal::LogPolicy::Overwrite) {
    shoal::LogOptions o;
    o.slots = slots;
    o.max_record = max_record;
    o.policy = policy;
    return o;
}

TEST_F(LogTest, AppendPrintfAndStreamFormsComeBackWithLevelsAndFields) {
    shoal::Store store(path_, opts_);
    shoal::Log log(store, "app", geometry(64, 200));
    shoal::LogReader r = log.reader("drain");
    EXPECT_EQ(log.append(shoal::LogLevel::Notice, "started"), std::optional<std::uint64_t>(0));
    EXPECT_EQ(log.append(shoal::LogLevel::Error, "request", {{"path", "/a"}, {"ms", "12"}}),
              std::optional<std::uint64_t>(1));
    EXPECT_EQ(log.printf(shoal::LogLevel::Warning, "x=%d y=%s", 42, "why"),
              std::optional<std::uint64_t>(2));
    int x = 7;
    log.info() << "x=" << x << " pi=" << 3.5;
    log.debug().field("k", "v") << "with a field";
    EXPECT_EQ(log.append(std::uint8_t{200}, "own level"), std::optional<std::uint64_t>(5));

    auto a = r.read();
    ASSERT_TRUE(a);
    EXPECT_EQ(a->seq, 0u);
    EXPECT_EQ(a->level, 5);
    EXPECT_EQ(a->message, "started");
    EXPECT_EQ(a->pid, static_cast<std::uint32_t>(getpid()));
    EXPECT_GT(a->time_ns, 0u);
    auto b = r.read();
    ASSERT_TRUE(b);
    EXPECT_EQ(b->level, 3);
    EXPECT_EQ(b->fields, (std::vector<std::pair<std::string, std::string>>{{"path", "/a"}, {"ms", "12"}}));
    EXPECT_EQ(b->field("ms"), std::optional<std::string_view>("12"));
    EXPECT_EQ(b->field("none"), std::nullopt);
    auto c = r.read();
    ASSERT_TRUE(c);
    EXPECT_EQ(c->level, 4);
    EXPECT_EQ(c->message, "x=42 y=why");
    auto d = r.read();
    ASSERT_TRUE(d);
    EXPECT_EQ(d->level, 6);
    EXPECT_EQ(d->message, "x=7 pi=3.5");
    auto e = r.read();
    ASSERT_TRUE(e);
    EXPECT_EQ(e->level, 7);
    EXPECT_EQ(e->message, "with a field");
    EXPECT_EQ(e->field("k"), std::optional<std::string_view>("v"));
    auto f = r.read();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->level, 200);
    EXPECT_FALSE(r.read());
    EXPECT_FALSE(r.read_wait(20ms));
    EXPECT_EQ(r.position(), 6u);
    EXPECT_EQ(r.missed(), 0u);
    EXPECT_EQ(r.skipped(), 0u);

    // A long printf goes through the heap; still one record.
    std::string big(1000, 'z');
    shoal::Log wide(store, "wide", geometry(8, 4096));
    shoal::LogReader wr = wide.reader("r");
    wide.printf(shoal::LogLevel::Info, "%s!", big.c_str());
    EXPECT_EQ(wr.read()->message, big + "!");
    EXPECT_TRUE(log.remove_reader("drain"));
    EXPECT_FALSE(log.remove_reader("drain"));
}

TEST_F(LogTest, ReadBatchTakesWhatWasPublishedInOnePass) {
    shoal::Store store(path_, opts_);
    shoal::Log log(store, "app", geometry(16, 100));
    shoal::LogReader r = log.reader("drain");
    EXPECT_TRUE(r.read_batch(8).empty());
    EXPECT_TRUE(r.read_batch(8, 20ms).empty());
    for (int i = 0; i < 5; i++)
        log.append(shoal::LogLevel::Info, "m" + std::to_string(i), {{"i", std::to_string(i)}});
    auto a = r.read_batch(3);
    ASSERT_EQ(a.size(), 3u);
    for (std::size_t i = 0; i < a.size(); i++) {
        EXPECT_EQ(a[i].seq, i);
        EXPECT_EQ(a[i].message, "m" + std::to_string(i));
        EXPECT_EQ(a[i].field("i").value_or(""), std::to_string(i));
    }
    auto b = r.read_batch(8, 100ms);
    ASSERT_EQ(b.size(), 2u);
    EXPECT_EQ(b[0].seq, 3u);
    EXPECT_EQ(b[1].message, "m4");
    EXPECT_TRUE(r.read_batch(8).empty());
    EXPECT_EQ(r.position(), 5u);
    EXPECT_THROW(r.read_batch(0), shoal::Error);
}

TEST_F(LogTest, BadInputAndFullRingsFailClearly) {
    shoal::Store store(path_, opts_);
    EXPECT_THROW(shoal::Log(store, "absent"), shoal::Error);
    try {
        shoal::Log(store, "bad", geometry(1, 100));
        FAIL() << "a log of 1 slot was made";
    } catch (const shoal::Error& e) {
        EXPECT_EQ(e.code(), SHOAL_INVALID);
    }
    shoal::Log log(store, "app", geometry(4, 100, shoal::LogPolicy::Drop));
    shoal::LogReader r = log.reader("r");
    try {
        log.append(shoal::LogLevel::Info, std::string(101, 'x'));
        FAIL() << "a record too large was appended";
    } catch (const shoal::Error& e) {
        EXPECT_EQ(e.code(), SHOAL_INVALID);
    }
    // The stream form throws from the temporary's destructor, at the end of the statement.
    EXPECT_THROW(log.info() << std::string(101, 'x'), shoal::Error);
    // A statement an exception leaves half done appends nothing (and does not terminate).
    auto thrower = []() -> int { throw std::runtime_error("while streaming"); };
    EXPECT_THROW(log.info() << "half " << thrower(), std::runtime_error);
    EXPECT_FALSE(r.read());
    for (int i = 0; i < 4; i++) EXPECT_EQ(log.append(shoal::LogLevel::Info, "r"), std::optional<std::uint64_t>(i));
    EXPECT_EQ(log.append(shoal::LogLevel::Info, "dropped"), std::nullopt);
    EXPECT_THROW(log.reader(""), shoal::Error);

    shoal::Log wait(store, "wait", geometry(4, 100, shoal::LogPolicy::Wait));
    shoal::LogReader wr = wait.reader("r");
    for (int i = 0; i < 4; i++) wait.append(shoal::LogLevel::Info, "r");
    try {
        wait.append(shoal::LogLevel::Info, "late", {}, 100ms);
        FAIL() << "a full ring took a record under the wait policy";
    } catch (const shoal::Error& e) {
        EXPECT_EQ(e.code(), SHOAL_TIMEOUT);
    }
    ASSERT_TRUE(wr.read());
    EXPECT_EQ(wait.append(shoal::LogLevel::Info, "room", {}, 5000ms), std::optional<std::uint64_t>(4));
}

TEST_F(LogTest, ANamedCursorOutlivesItsProcess) {
    {
        shoal::Store store(path_, opts_);
        shoal::Log log(store, "app", geometry(256, 100));
        log.reader("drain");
        for (int i = 0; i < 50; i++) log.append(shoal::LogLevel::Info, "r" + std::to_string(i));
    }
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        // A child that reads 20 records and ends without closing anything.
        int rc = 1;
        try {
            shoal::Store store(path_, opts_);
            shoal::Log log(store, "app");
            shoal::LogReader r = log.reader("drain");
            rc = 0;
            for (int i = 0; i < 20; i++) {
                auto rec = r.read(5000ms);
                if (!rec || rec->message != "r" + std::to_string(i)) rc = 2;
            }
        } catch (...) {
            rc = 3;
        }
        _exit(rc);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    ASSERT_EQ(WEXITSTATUS(status), 0);
    shoal::Store store(path_, opts_);
    shoal::Log log(store, "app");
    shoal::LogReader r = log.reader("drain");
    EXPECT_EQ(r.position(), 20u);
    for (int i = 20; i < 50; i++) {
        auto rec = r.read();
        ASSERT_TRUE(rec);
        EXPECT_EQ(rec->seq, static_cast<std::uint64_t>(i));
    }
    EXPECT_FALSE(r.read());
}

TEST_F(LogTest, ThreadsStreamingAllComeOutInOrder) {
    shoal::Store store(path_, opts_);
    shoal::Log log(store, "app", geometry(1024, 128, shoal::LogPolicy::Wait));
    shoal::LogReader r = log.reader("drain");
    const int threads = 4, n = 2000;
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; t++)
        ts.emplace_back([&log, t] {
            for (int i = 0; i < n; i++) log.info().field("t", std::to_string(t)) << i;
        });
    std::map<int, std::vector<int>> got;
    int total = 0;
    auto deadline = std::chrono::steady_clock::now() + 120s;
    while (total < threads * n && std::chrono::steady_clock::now() < deadline) {
        auto rec = r.read(100ms);
        if (!rec) continue;
        got[std::stoi(std::string(*rec->field("t")))].push_back(std::stoi(rec->message));
        total++;
    }
    for (auto& t : ts) t.join();
    for (int t = 0; t < threads; t++) {
        std::vector<int> want(n);
        for (int i = 0; i < n; i++) want[i] = i;
        EXPECT_EQ(got[t], want) << "thread " << t;
    }
    EXPECT_FALSE(r.read());
    EXPECT_EQ(r.missed(), 0u);
}

}  // namespace
