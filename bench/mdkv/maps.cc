// The in-memory maps mem_meta_kv_benchmark measured, run the way `shoal bench --format
// mdtest` runs Shoal: the same keys (made from their index on the fly, with the functions
// of crates/shoal-cli/src/benchkeys.rs), the same shares of keys per thread, the same
// phases (PUT, GET in insertion order, GET_RAND in a random order, DEL), pinning and rounds.
//
//   maps --map std|std-mutex|absl --threads N --keys TOTAL --keys-pattern seq|rand
//        [--pin START] [--rounds R]
//   maps --selftest        prints the keys of the test vectors shared with the Rust code
//
// std: one std::unordered_map per thread (as the benchmark does); std-mutex: one
// std::unordered_map behind a std::mutex shared by all threads; absl: one
// absl::flat_hash_map per thread. Keys are std::string, values int32_t. Lookups pass a
// std::string_view (heterogeneous lookup), so that no read allocates a string.
//
// Thread w owns keys w, w + N, w + 2N, ... (N threads). In a shared map a thread reads the
// next thread's keys, in a private map its own, as `shoal bench` does.
//
// The report in the benchmark's layout goes to stderr; one JSON object to stdout.
#include <absl/container/flat_hash_map.h>
#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace {

constexpr uint64_t kM1 = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t kM2 = 0xbf58476d1ce4e5b9ULL;
constexpr uint64_t kKeySeed = 0x53484f414c4b4559ULL;
constexpr uint64_t kOrderSeed = 0x4f52444552212121ULL;

// A permutation of 0..n computed per index (see Perm in benchkeys.rs).
struct Perm {
  uint64_t n, mask, seed;
  unsigned shift;
  Perm(uint64_t n_, uint64_t seed_) : n(n_), seed(seed_) {
    uint64_t p = 1;
    while (p < (n_ ? n_ : 1)) p <<= 1;
    mask = p - 1;
    unsigned bits = __builtin_popcountll(mask);
    shift = (bits + 1) / 2;
    if (shift == 0) shift = 1;
  }
  uint64_t round(uint64_t x) const {
    x = (x * kM1 + seed) & mask;
    x ^= x >> shift;
    x = (x * kM2) & mask;
    x ^= x >> shift;
    return (x * kM1) & mask;
  }
  uint64_t get(uint64_t x) const {
    do {
      x = round(x);
    } while (x >= n);
    return x;
  }
};

uint64_t Mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * kM2;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

size_t PutDec(char *out, uint64_t n) {
  char tmp[20];
  size_t k = 20;
  do {
    tmp[--k] = char('0' + n % 10);
    n /= 10;
  } while (n);
  memcpy(out, tmp + k, 20 - k);
  return 20 - k;
}

struct Gen {
  bool rand;
  uint64_t keys;
  Perm perm;
  Gen(bool r, uint64_t k) : rand(r), keys(k), perm(k, kKeySeed) {}
  // Key i into buf (64 bytes); returns a view of it.
  std::string_view Key(uint64_t i, char *buf) const {
    uint64_t a, b;
    if (rand) {
      a = perm.get(i);
      b = Mix64(i ^ kKeySeed) % keys;
    } else {
      a = i / 10000;
      b = i;
    }
    memcpy(buf, "file.mdtest.", 12);
    size_t k = 12;
    k += PutDec(buf + k, a);
    buf[k++] = '.';
    k += PutDec(buf + k, b);
    return std::string_view(buf, k);
  }
};

struct SvHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StdMap = std::unordered_map<std::string, int32_t, SvHash, std::equal_to<>>;
using AbslMap = absl::flat_hash_map<std::string, int32_t>;

// The view a map's find takes: Debian's Abseil has a string_view of its own.
template <class M>
struct View {
  static std::string_view of(std::string_view k) { return k; }
};
template <>
struct View<AbslMap> {
  static absl::string_view of(std::string_view k) { return {k.data(), k.size()}; }
};

// The operations every map offers; Locked wraps each in the shared mutex.
template <class M>
struct Plain {
  M m;
  bool put(std::string_view k, int32_t v) { return m.try_emplace(std::string(k), v).second; }
  bool get(std::string_view k, int32_t *v) {
    auto it = m.find(View<M>::of(k));
    if (it == m.end()) return false;
    *v = it->second;
    return true;
  }
  bool del(std::string_view k) {
    auto it = m.find(View<M>::of(k));
    if (it == m.end()) return false;
    m.erase(it);
    return true;
  }
};

template <class M>
struct Locked {
  Plain<M> p;
  std::mutex mu;
  bool put(std::string_view k, int32_t v) {
    std::string s(k);  // allocate outside the lock
    std::lock_guard<std::mutex> g(mu);
    return p.m.try_emplace(std::move(s), v).second;
  }
  bool get(std::string_view k, int32_t *v) {
    std::lock_guard<std::mutex> g(mu);
    return p.get(k, v);
  }
  bool del(std::string_view k) {
    std::lock_guard<std::mutex> g(mu);
    return p.del(k);
  }
};

int64_t RssBytes() {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  long long kb = 0;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "VmRSS: %lld kB", &kb) == 1) break;
  }
  fclose(f);
  return kb * 1024;
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

const char *kPhases[] = {"PUT", "GET", "GET_RAND", "DEL"};

struct Opts {
  std::string map = "std";
  uint64_t threads = 1, keys = 0, rounds = 1;
  long pin = -1;
  bool rand = false;
};

[[noreturn]] void Usage(const char *msg) {
  fprintf(stderr,
          "maps: %s\nusage: maps --map std|std-mutex|absl --threads N --keys TOTAL "
          "--keys-pattern seq|rand [--pin START] [--rounds R] | --selftest\n",
          msg);
  exit(2);
}

uint64_t ShareLen(uint64_t w, uint64_t n, uint64_t keys) {
  return w >= keys ? 0 : (keys - w - 1) / n + 1;
}

// Runs the benchmark on MapT (Plain<...> private per thread, or Locked<...> shared).
template <class MapT>
int Run(const Opts &o, bool shared, const char *system) {
  const uint64_t n = o.threads;
  const Gen gen(o.rand, o.keys);
  std::vector<std::unique_ptr<MapT>> maps;
  for (uint64_t i = 0; i < (shared ? 1 : n); i++) maps.emplace_back(new MapT());
  pthread_barrier_t start, end;
  pthread_barrier_init(&start, nullptr, unsigned(n + 1));
  pthread_barrier_init(&end, nullptr, unsigned(n + 1));
  std::vector<uint64_t> errors(n * 8, 0);  // padded: one cache line per thread
  const int64_t rss0 = RssBytes();
  std::vector<std::thread> ts;
  const uint64_t phases = 4 * o.rounds;
  for (uint64_t w = 0; w < n; w++) {
    ts.emplace_back([&, w] {
      if (o.pin >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(int(o.pin + w), &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
          fprintf(stderr, "maps: cannot pin thread %lu to core %lu\n", (unsigned long)w,
                  (unsigned long)(o.pin + w));
          exit(2);
        }
      }
      MapT &m = *maps[shared ? 0 : w];
      const uint64_t src = shared ? (w + 1) % n : w;
      const uint64_t len = ShareLen(src, n, o.keys);
      const Perm order(len, kOrderSeed);
      char kb[64];
      uint64_t err = 0;
      int32_t v;
      for (uint64_t p = 0; p < phases; p++) {
        pthread_barrier_wait(&start);
        switch (p % 4) {
          case 0:
            for (uint64_t i = w; i < o.keys; i += n) err += !m.put(gen.Key(i, kb), int32_t(i));
            break;
          case 1:
            for (uint64_t i = src; i < o.keys; i += n)
              err += !m.get(gen.Key(i, kb), &v) || v != int32_t(i);
            break;
          case 2:
            for (uint64_t j = 0; j < len; j++) {
              uint64_t i = src + n * order.get(j);
              err += !m.get(gen.Key(i, kb), &v) || v != int32_t(i);
            }
            break;
          case 3:
            for (uint64_t i = w; i < o.keys; i += n) err += !m.del(gen.Key(i, kb));
            break;
        }
        pthread_barrier_wait(&end);
      }
      errors[w * 8] = err;
    });
  }
  std::string json = std::string("{\"system\":\"") + system + "\",\"workers\":" +
                     std::to_string(n) + ",\"keys\":" + std::to_string(o.keys) +
                     ",\"keys_pattern\":\"" + (o.rand ? "rand" : "seq") +
                     "\",\"pin\":" + std::to_string(o.pin) +
                     ",\"rounds\":" + std::to_string(o.rounds) + ",\"phases\":[";
  int64_t mem = 0;
  fprintf(stderr, "%s benchmark, pid %d\n%lu thread(s), start_core %ld\n", system, getpid(),
          (unsigned long)n, o.pin);
  fprintf(stderr, "Each thread put, get, delete %lu elements, total %lu ops\n",
          (unsigned long)ShareLen(0, n, o.keys), (unsigned long)o.keys);
  for (uint64_t p = 0; p < phases; p++) {
    // The clock starts before the barrier: on a busy machine this thread may be scheduled
    // out after it, while the workers run.
    double t0 = Now();
    pthread_barrier_wait(&start);
    pthread_barrier_wait(&end);
    double secs = Now() - t0;
    const char *name = kPhases[p % 4];
    double mops = double(o.keys) / secs / 1e6;
    if (p % 4 == 0) {
      int64_t cost = RssBytes() - rss0;
      if (cost > mem) mem = cost;
      fprintf(stderr,
              "[PUT] total %.4f Mops, in %.4f s, %.4f MB/s, cost %.4f MB\n"
              "      per-thread %.4f Mops, %.4f MB/s\n",
              mops, secs, cost / secs / 1e6, cost / 1e6, mops / n, cost / secs / 1e6 / n);
    } else {
      fprintf(stderr, "[%s] total %.4f Mops, in %.4f s\n      per-thread %.4f Mops\n", name,
              mops, secs, mops / n);
    }
    char buf[200];
    snprintf(buf, sizeof buf, "%s{\"phase\":\"%s\",\"round\":%lu,\"ops\":%lu,\"seconds\":%.6f}",
             p ? "," : "", name, (unsigned long)(p / 4), (unsigned long)o.keys, secs);
    json += buf;
  }
  for (auto &t : ts) t.join();
  uint64_t err = 0;
  for (uint64_t w = 0; w < n; w++) err += errors[w * 8];
  fprintf(stderr, "memory: %.4f MB (VmRSS growth with %lu entries), %.1f bytes per entry\n",
          mem / 1e6, (unsigned long)o.keys, double(mem) / double(o.keys));
  json += "],\"memory_bytes\":" + std::to_string(mem) +
          ",\"entries\":" + std::to_string(o.keys) +
          ",\"failed_checks\":" + std::to_string(err) + "}";
  printf("%s\n", json.c_str());
  if (err) {
    fprintf(stderr, "maps: %lu operations returned a wrong result\n", (unsigned long)err);
    return 1;
  }
  return 0;
}

void SelfTest() {
  Gen seq(false, 20000000), rnd(true, 20000000);
  char kb[64];
  printf("%s\n", std::string(seq.Key(0, kb)).c_str());
  printf("%s\n", std::string(seq.Key(123456, kb)).c_str());
  for (uint64_t i : {uint64_t(0), uint64_t(1), uint64_t(19999999)})
    printf("%s\n", std::string(rnd.Key(i, kb)).c_str());
  Perm p(1000, kOrderSeed);
  printf("%lu %lu %lu\n", (unsigned long)p.get(0), (unsigned long)p.get(1),
         (unsigned long)p.get(999));
}

uint64_t ParseU(const char *s, const char *what) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || *end || !*s) Usage((std::string("bad ") + what).c_str());
  return v;
}

}  // namespace

int main(int argc, char **argv) {
  Opts o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--selftest") {
      SelfTest();
      return 0;
    }
    if (i + 1 >= argc) Usage(("missing value after " + a).c_str());
    const char *v = argv[++i];
    if (a == "--map") {
      o.map = v;
    } else if (a == "--threads") {
      o.threads = ParseU(v, "--threads");
    } else if (a == "--keys") {
      o.keys = ParseU(v, "--keys");
    } else if (a == "--rounds") {
      o.rounds = ParseU(v, "--rounds");
    } else if (a == "--pin") {
      o.pin = std::string(v) == "-1" ? -1 : long(ParseU(v, "--pin"));
    } else if (a == "--keys-pattern") {
      if (std::string(v) != "seq" && std::string(v) != "rand")
        Usage("--keys-pattern is seq or rand");
      o.rand = std::string(v) == "rand";
    } else {
      Usage(("unknown option " + a).c_str());
    }
  }
  if (o.threads < 1 || o.threads > 1024) Usage("--threads is 1 to 1024");
  if (o.keys < o.threads) Usage("--keys must be at least --threads");
  if (o.rounds < 1) Usage("--rounds is at least 1");
  if (o.pin >= 0 && uint64_t(o.pin) + o.threads > std::thread::hardware_concurrency())
    Usage("--pin START + threads exceeds the cores of this machine");
  if (o.map == "std") return Run<Plain<StdMap>>(o, false, "std::unordered_map (per thread)");
  if (o.map == "std-mutex")
    return Run<Locked<StdMap>>(o, true, "std::unordered_map (shared, mutex)");
  if (o.map == "absl") return Run<Plain<AbslMap>>(o, false, "absl::flat_hash_map (per thread)");
  Usage("--map is std, std-mutex or absl");
}
