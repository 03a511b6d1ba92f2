// Opening sealed token payloads beside the reading of their rows (pipelined_open.cpp;
// docs/store.md "Encryption at rest"): a restore of an encrypted memory reads rows on one thread
// while a worker opens full batches in place. Private to the store.
#pragma once
#include <array>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "crypto.h"

namespace svattn::store_detail {

/// Copies a token's key and value bytes: a plaintext row's, or a token message's ciphertext that
/// is then opened in place.
inline void copy_token_parts(const std::uint8_t* k, std::size_t kn, const std::uint8_t* v,
                             std::size_t vn, void* key, void* value) {
  if (kn > 0) std::memcpy(key, k, kn);
  if (vn > 0) std::memcpy(value, v, vn);
}

/// Opens sealed blobs behind the reading of their rows (a restore of an encrypted memory;
/// docs/store.md "Encryption at rest"): the reader copies each blob's ciphertext straight into its
/// destination (taking the first-touch page faults there, as a plaintext read does) and keeps its
/// nonce and tag in the current batch. Full batches end where a record does (so no opener is in two
/// batches) and are queued for a worker thread, which opens them in place while the reader goes on
/// without waiting for it; finish() opens what is left on both threads and reports the earliest
/// token's failure. Destinations must stay valid until finish() (or the destructor, which stops
/// the worker after its current batch).
class PipelinedOpen {
 public:
  PipelinedOpen() = default;
  ~PipelinedOpen();
  PipelinedOpen(const PipelinedOpen&) = delete;
  PipelinedOpen& operator=(const PipelinedOpen&) = delete;
  /// Queues the sealed blob of `n` bytes at `blob` to be opened under `op` into `out`
  /// (`out_bytes`, exactly the opened size: InvalidArgument otherwise).
  void add(Opener& op, const RecordAad& aad, const void* blob, std::size_t n, void* out,
           std::size_t out_bytes);
  /// Queues a token message (Sealer::seal_token) to be opened under `op`: its key column at
  /// `key_blob` (kn + kTokenKeyOverhead bytes) and value column at `value_blob` (vn +
  /// kTokenValueOverhead bytes; sizes checked by the caller) into `key_out` (kn bytes) and
  /// `value_out` (vn bytes).
  void add_token(Opener& op, const RecordAad& aad, const std::uint8_t* key_blob,
                 const std::uint8_t* value_blob, void* key_out, std::size_t kn, void* value_out,
                 std::size_t vn);
  /// Opens everything queued; rethrows the first failure (RecordTampered names its record). A
  /// caller that failed itself calls it before rethrowing its own error, so that an earlier
  /// token's failure (queued or in the worker) is the one reported.
  void finish();

 private:
  struct Item {
    Opener* op;
    RecordAad aad;
    std::array<std::uint8_t, 1 + kNonceBytes> header;  // version, nonce
    std::array<std::uint8_t, kTagBytes> tag;
    void* buf;  // holds the ciphertext until opened in place
    std::size_t bytes;
    void* value_buf;  // a token message's value part (aad.field == kToken), else unused
    std::size_t value_bytes;
  };
  using Batch = std::vector<Item>;
  struct Queued {
    Batch items;  // released once opened
    std::exception_ptr failure;
  };
  static void open_batch(const Batch& b);
  Item& next_item(const Opener& op);  // queues a full batch first, at a record's end
  void submit();
  bool open_next();  // opens the next batch nobody has taken (either thread); false: none left
  void work();       // the worker thread's loop until stopped
  Batch filling_;
  std::deque<Queued> queue_;  // in reading order; a deque keeps taken batches in place
  std::size_t taken_ = 0;     // batches taken by a thread
  std::size_t opened_ = 0;    // ... and done
  // One worker thread for the whole pass, started by the first full batch (a pass of fewer blobs
  // never starts one), instead of a thread per batch.
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false;
};

}  // namespace svattn::store_detail
