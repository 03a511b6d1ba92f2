// Encryption-at-rest micro-benchmark (docs/performance.md "Encryption at rest"):
// AES-256-GCM seal/open throughput of one record's key and value bytes against a plain memcpy of
// the same bytes in the same run, per-field blobs (schema 6's layout: one key and one value blob
// per token), token messages (schema 7's layout: one message per token, split over its key and
// value columns) and per-record blobs; data-key creation in the key store; and the projected
// cost of encrypting an import of --tokens tokens. Prints Markdown.
//   bench_crypto [--record 24] [--d 64] [--tokens 200000] [--mb 256] [--reps 5] [--dir /tmp]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.h"
#include "store/crypto.h"
#include "store/key_store.h"
#include "support/random.h"

using namespace svattn::store_detail;

namespace {

using svattn::bench::median;
using svattn::bench::now;

// Keeps the compiler from removing a copy whose result is never read.
void clobber(void* p) { asm volatile("" : : "g"(p) : "memory"); }

struct Args {
  int record = 24;
  int d = 64;
  long tokens = 200000;
  int mb = 256;  // plaintext bytes processed per repetition
  int reps = 5;
  std::string dir = "/tmp";
};

constexpr char kUsage[] =
    "bench_crypto [--record 24] [--d 64] [--tokens 200000] [--mb 256] [--reps 5] [--dir /tmp]";

Args parse(int argc, char** argv) {
  Args a;
  svattn::bench::parse_options(argc, argv, "bench_crypto", kUsage,
                               [&](const std::string& k, const std::string& v) {
                                 if (k == "--record")
                                   a.record = std::stoi(v);
                                 else if (k == "--d")
                                   a.d = std::stoi(v);
                                 else if (k == "--tokens")
                                   a.tokens = std::stol(v);
                                 else if (k == "--mb")
                                   a.mb = std::stoi(v);
                                 else if (k == "--reps")
                                   a.reps = std::stoi(v);
                                 else if (k == "--dir")
                                   a.dir = v;
                                 else
                                   return false;
                                 return true;
                               });
  if (a.record <= 0 || a.d <= 0 || a.tokens <= 0 || a.mb <= 0 || a.reps <= 0) {
    std::fprintf(stderr, "bench_crypto: every option must be > 0\n");
    std::exit(2);
  }
  return a;
}

// One record's plaintext: keys then values, record x d fp64 each.
struct Record {
  std::vector<std::uint8_t> bytes;
  std::size_t field_bytes;  // one token's key (or value): d * 8
};

Record make_record(const Args& a) {
  Record r;
  r.field_bytes = static_cast<std::size_t>(a.d) * sizeof(double);
  std::vector<double> v(static_cast<std::size_t>(2 * a.record * a.d));
  svattn::support::Rng gen(7);
  for (double& x : v) x = gen.uniform();
  r.bytes.resize(v.size() * sizeof(double));
  std::memcpy(r.bytes.data(), v.data(), r.bytes.size());
  return r;
}

// Seconds per record of `op`, median over reps, each rep processing about a.mb MB.
template <typename Op>
double per_record(const Args& a, const Record& r, Op op) {
  const long records =
      std::max<long>(1, static_cast<long>(a.mb) * 1000000L / static_cast<long>(r.bytes.size()));
  std::vector<double> t;
  for (int rep = 0; rep < a.reps; ++rep) {
    const double t0 = now();
    for (long i = 0; i < records; ++i) op(i);
    t.push_back((now() - t0) / static_cast<double>(records));
  }
  return median(t);
}

void row(const char* what, double sec, double bytes, double memcpy_sec) {
  std::printf("| %s | %.3f | %.0f | %.1f |\n", what, sec * 1e6, bytes / sec / 1e6,
              sec / memcpy_sec);
}

RecordAad aad_of(long rec, int pos, RecordField f) {
  RecordAad x;
  x.memory_id = 1;
  x.record_id = rec;
  x.position = pos;
  x.field = f;
  return x;
}

RecordField field_of(int f) { return f % 2 ? RecordField::kValue : RecordField::kKey; }

// Seconds per record: memcpy baseline, per-token and per-record seal/open (one Sealer / Opener per
// record, as the store would use them: one data key per record). Exits 1 if a round trip differs.
struct CryptoTimes {
  double memcpy = 0, seal_tok = 0, open_tok = 0, seal_msg = 0, open_msg = 0, seal_rec = 0,
         open_rec = 0;
};

CryptoTimes measure_tokens(const Args& a, const Record& r, const SecretKey& key, CryptoTimes t) {
  const int fields = 2 * a.record;  // per-token blobs: key and value of each token
  const std::size_t fb = r.field_bytes;
  std::vector<std::uint8_t> dst(r.bytes.size());
  std::vector<std::vector<std::uint8_t>> sealed(static_cast<std::size_t>(fields));
  t.memcpy = per_record(a, r, [&](long) {
    std::memcpy(dst.data(), r.bytes.data(), r.bytes.size());
    clobber(dst.data());
  });
  t.seal_tok = per_record(a, r, [&](long i) {
    Sealer sealer(key);
    for (int f = 0; f < fields; ++f) {
      sealer.seal_into(aad_of(i, f / 2, field_of(f)), r.bytes.data() + f * fb, fb, sealed[f]);
    }
  });
  // Open the blobs of record 0 (the loop above sealed them with the AAD of its last record).
  for (int f = 0; f < fields; ++f) {
    seal_into(key, aad_of(0, f / 2, field_of(f)), r.bytes.data() + f * fb, fb, sealed[f]);
  }
  t.open_tok = per_record(a, r, [&](long) {
    Opener opener(key);
    for (int f = 0; f < fields; ++f) {
      opener.open_into(aad_of(0, f / 2, field_of(f)), sealed[f].data(), sealed[f].size(),
                       dst.data() + f * fb, fb);
    }
  });
  if (dst != r.bytes) {
    std::fprintf(stderr, "bench_crypto: per-token round trip differs\n");
    std::exit(1);
  }
  return t;
}

// One token message per token (Sealer::seal_token): the key and value of token p are fields 2p
// and 2p + 1 of the record's bytes.
CryptoTimes measure_token_messages(const Args& a, const Record& r, const SecretKey& key,
                                   CryptoTimes t) {
  const std::size_t fb = r.field_bytes;
  std::vector<std::uint8_t> dst(r.bytes.size());
  std::vector<std::vector<std::uint8_t>> kc(static_cast<std::size_t>(a.record)),
      vc(static_cast<std::size_t>(a.record));
  const auto seal_all = [&](Sealer& sealer, long i) {
    for (int p = 0; p < a.record; ++p) {
      const std::uint8_t* k = r.bytes.data() + 2 * p * fb;
      sealer.seal_token(aad_of(i, p, RecordField::kToken), k, fb, k + fb, fb, kc[p], vc[p]);
    }
  };
  t.seal_msg = per_record(a, r, [&](long i) {
    Sealer sealer(key);
    seal_all(sealer, i);
  });
  Sealer zero(key);
  seal_all(zero, 0);
  t.open_msg = per_record(a, r, [&](long) {
    Opener opener(key);
    for (int p = 0; p < a.record; ++p) {
      std::uint8_t* k = dst.data() + 2 * p * fb;
      std::memcpy(k, kc[p].data() + kTokenKeyOverhead, fb);  // the store copies, then opens
      std::memcpy(k + fb, vc[p].data(), fb);
      opener.open_token_in_place(aad_of(0, p, RecordField::kToken), kc[p].data(), vc[p].data() + fb,
                                 k, fb, k + fb, fb);
    }
  });
  if (dst != r.bytes) {
    std::fprintf(stderr, "bench_crypto: token-message round trip differs\n");
    std::exit(1);
  }
  return t;
}

CryptoTimes measure_records(const Args& a, const Record& r, const SecretKey& key, CryptoTimes t) {
  const std::size_t half = r.bytes.size() / 2;
  std::vector<std::uint8_t> dst(r.bytes.size());
  std::vector<std::vector<std::uint8_t>> sealed(2);
  t.seal_rec = per_record(a, r, [&](long i) {
    Sealer sealer(key);
    sealer.seal_into(aad_of(i, 0, RecordField::kKey), r.bytes.data(), half, sealed[0]);
    sealer.seal_into(aad_of(i, 0, RecordField::kValue), r.bytes.data() + half, half, sealed[1]);
  });
  seal_into(key, aad_of(0, 0, RecordField::kKey), r.bytes.data(), half, sealed[0]);
  seal_into(key, aad_of(0, 0, RecordField::kValue), r.bytes.data() + half, half, sealed[1]);
  t.open_rec = per_record(a, r, [&](long) {
    Opener opener(key);
    opener.open_into(aad_of(0, 0, RecordField::kKey), sealed[0].data(), sealed[0].size(),
                     dst.data(), half);
    opener.open_into(aad_of(0, 0, RecordField::kValue), sealed[1].data(), sealed[1].size(),
                     dst.data() + half, half);
  });
  if (dst != r.bytes) {
    std::fprintf(stderr, "bench_crypto: per-record round trip differs\n");
    std::exit(1);
  }
  return t;
}

// Key store, index 0 unwrapped and 1 wrapped: create all keys in one transaction (as an import
// would), get every key (as an open would), median of 21 destroys (as forgets would).
struct KeyTimes {
  double create[2] = {0, 0}, get[2] = {0, 0}, destroy[2] = {0, 0};
};

KeyTimes measure_keys(const Args& a, long records) {
  KeyTimes t;
  const std::string ks_path = a.dir + "/bench_crypto_" + std::to_string(::getpid()) + ".keys";
  for (int wrapped = 0; wrapped < 2; ++wrapped) {
    for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(ks_path + s);
    KeyStoreOptions o;
    o.create = true;
    if (wrapped) {
      ::setenv("SVATTN_BENCH_MASTER", std::string(64, 'a').c_str(), 1);
      o.master.kind = MasterKeySource::Kind::kEnvironment;
      o.master.env_var = "SVATTN_BENCH_MASTER";
    }
    std::vector<KeyOwner> owners;
    for (long i = 0; i < records; ++i) owners.push_back({1, i});
    KeyStore ks(ks_path, o);
    double t0 = now();
    const std::vector<NewDataKey> keys = ks.create_keys(owners);
    t.create[wrapped] = now() - t0;
    t0 = now();
    for (const NewDataKey& k : keys) {
      KeyLookup g = ks.get(k.key_id);
      clobber(&g);
    }
    t.get[wrapped] = now() - t0;
    std::vector<double> d;
    for (std::size_t i = 0; i < std::min<std::size_t>(21, keys.size()); ++i) {
      t0 = now();
      const KeyDestruction x = ks.destroy(keys[i].key_id);
      d.push_back(now() - t0);
      if (!x.wal_truncated) std::fprintf(stderr, "bench_crypto: WAL not truncated\n");
    }
    t.destroy[wrapped] = median(d);
  }
  for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(ks_path + s);
  return t;
}

void print(const Args& a, const Record& r, const CryptoTimes& c, const KeyTimes& k, long records) {
  const double rb = static_cast<double>(r.bytes.size());
  std::printf(
      "## AES-256-GCM vs memcpy, record = %d tokens x d = %d fp64 keys + values (%zu bytes)\n\n",
      a.record, a.d, r.bytes.size());
  std::printf("median of %d repetitions of ~%d MB each, one thread\n\n", a.reps, a.mb);
  std::printf("| operation (one record) | us | MB/s | x memcpy |\n|---|---:|---:|---:|\n");
  row("memcpy (baseline)", c.memcpy, rb, c.memcpy);
  row("seal, per-field blobs (key, value of each token; schema 6)", c.seal_tok, rb, c.memcpy);
  row("open, per-field blobs", c.open_tok, rb, c.memcpy);
  row("seal, token messages (one per token; schema 7)", c.seal_msg, rb, c.memcpy);
  row("open, token messages", c.open_msg, rb, c.memcpy);
  row("seal, per-record blobs (all keys, all values)", c.seal_rec, rb, c.memcpy);
  row("open, per-record blobs", c.open_rec, rb, c.memcpy);
  const double n = static_cast<double>(records);
  std::printf(
      "\n## Projected cost of encrypting an import of %ld tokens (%ld records, %.1f MB)\n\n",
      a.tokens, records, n * rb / 1e6);
  std::printf("| part | seconds |\n|---|---:|\n");
  std::printf("| memcpy of the same bytes | %.4f |\n", n * c.memcpy);
  std::printf("| seal, per-field blobs | %.4f |\n", n * c.seal_tok);
  std::printf("| seal, token messages | %.4f |\n", n * c.seal_msg);
  std::printf("| seal, per-record blobs | %.4f |\n", n * c.seal_rec);
  std::printf("| open (store open), per-field blobs | %.4f |\n", n * c.open_tok);
  std::printf("| open (store open), token messages | %.4f |\n", n * c.open_msg);
  std::printf("| open (store open), per-record blobs | %.4f |\n", n * c.open_rec);
  for (int w = 0; w < 2; ++w) {
    const char* how = w ? "wrapped by a master key" : "unwrapped";
    std::printf("| create %ld data keys in the key store, %s (one transaction) | %.4f |\n", records,
                how, k.create[w]);
    std::printf("| get %ld data keys (store open), %s | %.4f |\n", records, how, k.get[w]);
  }
  std::printf("\n## Key destruction (one forget), key store of %ld keys\n\n", records);
  std::printf("| key store | median ms (21 destroys) |\n|---|---:|\n");
  std::printf("| unwrapped | %.2f |\n| wrapped | %.2f |\n", k.destroy[0] * 1e3, k.destroy[1] * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const Record r = make_record(a);
  const SecretKey key = SecretKey::random();
  CryptoTimes c = measure_tokens(a, r, key, CryptoTimes{});
  c = measure_token_messages(a, r, key, c);
  c = measure_records(a, r, key, c);
  const long records = (a.tokens + a.record - 1) / a.record;
  const KeyTimes k = measure_keys(a, records);
  print(a, r, c, k, records);
  return 0;
}
