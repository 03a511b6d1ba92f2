// The audited memory store (docs/store.md): construction, the read-only views (memory info,
// records, stored state, queries, the audit log) and the helpers the store's files share. The
// other responsibilities live in the files listed in store_impl.h.
#include "svattn/store.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "master_key.h"
#include "db/pg_uri.h"
#include "store_impl.h"
#include "svattn/hash.h"
#include "svattn/kernel.h"
#include "svattn/readout.h"
#include "support/clock.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the store writes fp64 blobs in native order and documents them as little-endian");

namespace svattn {

namespace store_detail {

const char* const kMagic = "svattn-store";
const std::string kZeroHash(64, '0');

std::string now_utc() { return support::utc_now_ms(); }

nlohmann::json diagnostics_to_json(const OpDiagnostics& d) {
  return {{"ops", d.ops},
          {"events", d.events},
          {"zero_steps", d.zero_steps},
          {"refused_entrants", d.refused_entrants},
          {"refactorizations", d.refactorizations},
          {"canonical_solves", d.canonical_solves},
          {"repairs", d.repairs},
          {"batch_fallbacks", d.batch_fallbacks},
          {"status", to_string(d.status)}};
}

nlohmann::json partition_sizes(const State& s) {
  return {{"margin", s.partition.margin.size()},
          {"error", s.partition.error.size()},
          {"reserve", s.partition.reserve.size()}};
}

// The outcome fields every operation's certificate carries.
void add_outcome_fields(nlohmann::json& cert, const Memory& mem, const State& after,
                        const OpDiagnostics& diagnostics) {
  cert["memory_tokens"] = mem.size();
  cert["partition_sizes"] = partition_sizes(after);
  cert["status"] = to_string(after.status);
  cert["diagnostics"] = diagnostics_to_json(diagnostics);
}

void check_record(std::int64_t record) {
  if (record < 0 || record > kMaxRecordId) {
    throw InvalidArgument("record id " + std::to_string(record) + " out of range [0, 2^40)");
  }
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// nlohmann's serializer is the UTF-8 validator: it throws type_error 316 on an invalid sequence.
bool valid_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

}  // namespace store_detail

using namespace store_detail;

Store::Store(const std::string& path, const StoreOptions& options)
    : impl_(std::make_unique<Impl>()) {
  if (options.busy_timeout_ms < 0) {
    throw InvalidArgument("busy_timeout_ms must be >= 0, got " +
                          std::to_string(options.busy_timeout_ms));
  }
  if (options.certificate_probes < 0) {
    throw InvalidArgument("certificate_probes must be >= 0, got " +
                          std::to_string(options.certificate_probes));
  }
  if (options.read_only && options.create) {
    throw InvalidArgument("StoreOptions: read_only and create exclude each other");
  }
  // Paths enter certificates and JSON output, which must be valid UTF-8.
  if (!valid_utf8(path)) throw InvalidArgument("store path is not valid UTF-8");
  check_master_key(options);  // a bad master key fails before any file is opened
  impl_->set_location(path);
  impl_->options = options;
  impl_->open();
}

void Store::Impl::set_location(const std::string& location) {
  if (!is_postgres_uri(location)) {
    path = location;
    return;
  }
  const PgLocation loc = parse_postgres_uri(location);
  path = loc.display;
  pg_conninfo = loc.conninfo;
  keys_path = loc.keys;
  if (is_postgres_uri(loc.keys) && parse_postgres_uri(loc.keys).conninfo == loc.conninfo) {
    throw InvalidArgument("store URI '" + loc.display +
                          "': keys= names the store's own database and schema; the key tables "
                          "need a separate database or schema");
  }
}

Store::~Store() {
  if (impl_ && impl_->db.is_open()) {
    bool truncated = false;
    if (!impl_->options.read_only) impl_->checkpoint(&truncated);
    impl_->db.close();
  }
}

Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;

const std::string& Store::path() const { return impl_->path; }
const StoreOptions& Store::options() const { return impl_->options; }
const std::string& Store::encryption() const { return impl_->encryption; }
std::string Store::key_store_path() const { return impl_->key_store_path(); }

void Store::validate_memory_name(const std::string& name) {
  if (name.empty() || name.size() > 256) {
    throw InvalidArgument("memory name must have 1 to 256 bytes, got " +
                          std::to_string(name.size()));
  }
  for (char ch : name) {
    if (static_cast<unsigned char>(ch) < 0x20) {
      throw InvalidArgument("memory name must not contain control characters");
    }
  }
  if (!valid_utf8(name)) throw InvalidArgument("memory name is not valid UTF-8");
}

std::vector<std::string> Store::memory_names() const {
  Impl& im = *impl_;
  return im.read([&] {
    std::vector<std::string> names;
    Statement q(im.db.handle(), "SELECT name FROM memories ORDER BY name");
    while (q.step()) names.push_back(q.text(0));
    return names;
  });
}

bool Store::has_memory(const std::string& name) const {
  Impl& im = *impl_;
  return im.read([&] {
    Statement q(im.db.handle(), "SELECT 1 FROM memories WHERE name = ?1");
    q.bind(1, name);
    return q.step();
  });
}

MemoryInfo Store::memory_info(const std::string& name) const {
  Impl& im = *impl_;
  return im.read([&] {
    const MemoryRow row = im.read_memory_row(name);
    MemoryInfo info;
    info.name = row.name;
    info.settings = row.settings;
    info.dim = row.dim;
    info.value_dim = row.value_dim;
    info.state_sha256 = row.state_sha256;
    info.last_audit_seq = row.last_audit_seq;
    info.b = row.b;
    info.status = row.status;
    info.warmup = row.warmup;
    // Index-only counts: all token rows minus the suspended records', and the support table's
    // margin/error counts.
    const auto [all_rows, suspended_rows] = im.record_rows.token_row_counts(row.id);
    info.stored_tokens = static_cast<int>(all_rows);
    info.tokens = info.stored_tokens - static_cast<int>(suspended_rows);
    Statement pq(im.db.handle(),
                 "SELECT coalesce(sum(CASE WHEN part = 1 THEN 1 ELSE 0 END), 0), "
                 "coalesce(sum(CASE WHEN part = 2 THEN 1 ELSE 0 END), 0) FROM support "
                 "WHERE memory_id = ?1");
    pq.bind(1, row.id);
    pq.step();
    info.margin = static_cast<int>(pq.int64(0));
    info.error = static_cast<int>(pq.int64(1));
    const auto [records, suspended] = im.record_rows.record_counts(row.id);
    info.records = static_cast<int>(records);
    info.suspended_records = static_cast<int>(suspended);
    info.file_state_sha256 = row.state_sha256;
    if (im.has_shredded(row.id)) im.describe_without_shredded(row, info);
    return info;
  });
}

std::vector<RecordInfo> Store::records(const std::string& name) const {
  Impl& im = *impl_;
  return im.read([&] {
    const MemoryRow row = im.read_memory_row(name);
    std::vector<RecordInfo> out;
    for (const store_detail::RecordRows::Summary& s : im.record_rows.summaries(row.id)) {
      RecordInfo ri;
      ri.record = s.record;
      ri.suspended = s.suspended;
      ri.tokens = static_cast<int>(s.token_rows);
      ri.shredded = im.is_shredded(row.id, ri.record);
      out.push_back(ri);
    }
    return out;
  });
}

const Memory& Store::memory(const std::string& name) {
  Impl& im = *impl_;
  return *im.read([&] { return im.ensure_loaded(im.read_memory_row(name)).memory.get(); });
}

RestoreReport Store::last_restore(const std::string& name) const {
  const auto it = impl_->restores.find(name);
  return it == impl_->restores.end() ? RestoreReport{} : it->second;
}

State Store::stored_state(const std::string& name) const {
  Impl& im = *impl_;
  return im.read([&] {
    const MemoryRow row = im.read_memory_row(name);
    if (im.has_shredded(row.id)) return im.ensure_loaded(row).memory->state();
    return im.load_state(row, im.record_rows.active_token_ids(row.id));
  });
}

// Queries read the stored support instead of restoring the memory (docs/store.md "Operations"). The
// readout depends only on the support (alpha > 0) and b, so the support rows are read with their
// token rows (O(|S u E| d)) and checked against the support digest persisted with the state hash
// the audit chain holds. Without a digest (a version-1 store read-only) the active tokens are read
// and the state's canonical hash recomputed (O(n d)). A support that fails its check is never
// used: the query falls back to restoring (which re-derives and reports).
const StoredSupport& Store::Impl::stored_support(const std::string& name) {
  const MemoryRow row = read_memory_row(name);
  require_settings_bound(row);  // a query under edited settings answers for another memory
  auto it = supports.find(name);
  if (it != supports.end() && it->second.id == row.id && it->second.seq == row.last_audit_seq) {
    return it->second;
  }
  StoredSupport out{row.id, row.last_audit_seq, row.dim, row.value_dim, row.settings.problem.kernel,
                    row.b,  Support{}};
  bool ok = false;
  std::string digest;
  if (has_shredded(row.id)) {  // the stored support may hold shredded tokens: use the re-solve
    const Memory& m = *ensure_loaded(row).memory;
    out.b = m.state().b;
    out.support = support_of(m.state(), m.tokens());
    return supports[name] = std::move(out);
  }
  if (schema_version >= 2) digest = screening_bounds.support_digest_of(row.id, row.state_sha256);
  if (!digest.empty()) {
    ok = support_digest(row.id, row.dim, row.value_dim, row.state_sha256, row.b, &out.support) ==
         digest;
  } else {
    const TokenSet tokens = load_active_tokens(row);
    const State state = load_state(row, tokens.ids);
    std::vector<int> order(tokens.ids.size());
    for (std::size_t t = 0; t < order.size(); ++t) order[t] = static_cast<int>(t);
    ok = stored_hash_matches(
        row, tokens, state.alpha, state.b,
        canonical_sha256(row.settings.problem, tokens, order, state.alpha, state.b));
    if (ok) out.support = support_of(state, tokens);
  }
  if (!ok) {
    std::fprintf(stderr,
                 "svattn: warning: memory '%s': the stored %s does not match its recorded hash; "
                 "re-deriving it from the tokens\n",
                 name.c_str(), digest.empty() ? "state" : "support");
    const Memory& m = *ensure_loaded(row).memory;  // throws FormatError when it cannot be trusted
    out.b = m.state().b;
    out.support = support_of(m.state(), m.tokens());
  }
  return supports[name] = std::move(out);
}

namespace {
void check_query_dim(const std::string& name, const StoredSupport& s, const RowMatrix& q) {
  if (q.cols() != s.dim) {
    throw InvalidArgument("dimension mismatch: memory '" + name + "' has key dimension " +
                          std::to_string(s.dim) + ", the queries have " + std::to_string(q.cols()) +
                          " columns");
  }
}
}  // namespace

RowMatrix Store::query(const std::string& name, const RowMatrix& queries) {
  Impl& im = *impl_;
  const StoredSupport& s = *im.read([&] { return &im.stored_support(name); });
  check_query_dim(name, s, queries);
  RowMatrix out(queries.rows(), s.value_dim);
  for (Eigen::Index i = 0; i < queries.rows(); ++i) {
    const Eigen::VectorXd q = queries.row(i).transpose();
    out.row(i) = readout(s.kernel, s.support, q).transpose();  // NaN for the empty memory
  }
  return out;
}

std::vector<double> Store::decision(const std::string& name, const RowMatrix& queries) {
  Impl& im = *impl_;
  const StoredSupport& s = *im.read([&] { return &im.stored_support(name); });
  check_query_dim(name, s, queries);
  std::vector<double> out;
  for (Eigen::Index i = 0; i < queries.rows(); ++i) {
    const Eigen::VectorXd q = queries.row(i).transpose();
    out.push_back(decision_function(s.kernel, s.support, s.b, q));
  }
  return out;
}

std::vector<AuditEntry> Store::audit() const {
  Impl& im = *impl_;
  return im.read([&] { return im.audit.read(); });
}

}  // namespace svattn
