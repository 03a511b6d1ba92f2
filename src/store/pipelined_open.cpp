// PipelinedOpen (pipelined_open.h): batches of sealed blobs queued as their rows are read, opened
// in place by one worker thread at idle priority and by the reader at finish().
#include "pipelined_open.h"

#include <pthread.h>
#include <sched.h>

#include <cstring>

namespace svattn::store_detail {

namespace {
// Blobs per batch (~256 KB of destinations at d = 64; a batch ends with its last record): small
// enough that finish() soon has nothing left to wait for when the idle worker is starved.
constexpr std::size_t kPipelineBatch = 512;
}  // namespace

PipelinedOpen::~PipelinedOpen() {
  if (!worker_.joinable()) return;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;  // the loop finishes a running batch first: it writes into the caller's buffers
  }
  changed_.notify_all();
  worker_.join();
}

void PipelinedOpen::add(Opener& op, const RecordAad& aad, const void* blob, std::size_t n,
                        void* out, std::size_t out_bytes) {
  const std::size_t bytes = opened_size(aad, n);
  if (out_bytes != bytes) {
    throw InvalidArgument("PipelinedOpen::add: output has " + std::to_string(out_bytes) +
                          " bytes, the sealed blob holds " + std::to_string(bytes));
  }
  const auto* b = static_cast<const std::uint8_t*>(blob);
  Item& it = next_item(op);
  it.op = &op;
  it.aad = aad;
  std::memcpy(it.header.data(), b, it.header.size());
  std::memcpy(it.tag.data(), b + it.header.size() + bytes, it.tag.size());
  it.buf = out;
  it.bytes = bytes;
  it.value_buf = nullptr;
  it.value_bytes = 0;
  if (bytes > 0) std::memcpy(out, b + it.header.size(), bytes);
}

void PipelinedOpen::add_token(Opener& op, const RecordAad& aad, const std::uint8_t* key_blob,
                              const std::uint8_t* value_blob, void* key_out, std::size_t kn,
                              void* value_out, std::size_t vn) {
  Item& it = next_item(op);
  it.op = &op;
  it.aad = aad;
  std::memcpy(it.header.data(), key_blob, it.header.size());
  std::memcpy(it.tag.data(), value_blob + vn, it.tag.size());
  it.buf = key_out;
  it.bytes = kn;
  it.value_buf = value_out;
  it.value_bytes = vn;
  copy_token_parts(key_blob + kTokenKeyOverhead, kn, value_blob, vn, key_out, value_out);
}

PipelinedOpen::Item& PipelinedOpen::next_item(const Opener& op) {
  // A full batch ends where a record (an opener) does: two threads never share an opener.
  if (filling_.size() >= kPipelineBatch && filling_.back().op != &op) submit();
  if (filling_.empty()) filling_.reserve(kPipelineBatch);
  return filling_.emplace_back();
}

void PipelinedOpen::open_batch(const Batch& b) {
  for (const Item& it : b) {
    if (it.aad.field == RecordField::kToken) {
      it.op->open_token_in_place(it.aad, it.header.data(), it.tag.data(), it.buf, it.bytes,
                                 it.value_buf, it.value_bytes);
    } else {
      it.op->open_in_place(it.aad, it.header.data(), it.tag.data(), it.buf, it.bytes);
    }
  }
}

void PipelinedOpen::submit() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({std::move(filling_), nullptr});
  }
  filling_ = Batch();
  if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  changed_.notify_all();
}

bool PipelinedOpen::open_next() {
  Queued* q = nullptr;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (taken_ == queue_.size()) return false;
    q = &queue_[taken_++];
  }
  try {
    open_batch(q->items);
  } catch (...) {
    q->failure = std::current_exception();
  }
  Batch().swap(q->items);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++opened_;
  }
  changed_.notify_all();
  return true;
}

void PipelinedOpen::work() {
#ifdef SCHED_IDLE
  // Only CPU time nothing else wants: while the rows stream in, the server and the reader can
  // keep both cores of a small machine busy, and a worker beside them slows the scan by more than
  // it opens. What it has not opened by the end, finish() opens on both threads. (Unsupported:
  // it runs at normal priority.)
  const sched_param idle{};
  pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
#endif
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return stop_ || taken_ < queue_.size(); });
      if (stop_) return;
    }
    open_next();
  }
}

void PipelinedOpen::finish() {
  if (!worker_.joinable()) {  // a pass of less than one batch: nothing was queued
    open_batch(filling_);
    filling_.clear();
    return;
  }
  if (!filling_.empty()) submit();
  while (open_next()) {  // what the worker has not taken yet, beside it
  }
  std::deque<Queued> done;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return opened_ == queue_.size(); });
    done.swap(queue_);
    taken_ = opened_ = 0;
  }
  for (Queued& q : done)
    if (q.failure != nullptr) std::rethrow_exception(q.failure);
}

}  // namespace svattn::store_detail
