// slot_server.cpp — where the libttft hooks go in a C++ server with request
// slots, in the style of llama.cpp's server: HTTP handlers post tasks to a
// queue, one loop assigns queued tasks to free slots, processes prompts in
// chunks and decodes one step for every generating slot, and streams the
// detokenized text of each slot to its client.
//
// The model, the clients and the clock are simulated (a virtual clock that
// advances by a fixed cost per batch step), so the example runs instantly,
// prints the same numbers on every run and checks them; in a real server
// every Time argument below is simply omitted (the library reads the clock).
//
// The hooks: begin at arrival in the HTTP handler (queueing for a slot is in
// TTFT); mark_scheduled and annotate (prompt-cache reuse) when a slot picks
// the task up; one Registry::engine_step per pass, from batch building to
// the end of the forward pass, before sampling (docs/integration.md,
// "Engine steps when the loop posts results to another thread"); one
// Registry::step_emitted per decode step for every slot whose text became
// visible in it; end after the step that finished it.
//
// Build: c++ -std=c++17 -I include examples/cpp/slot_server.cpp -lttft
#include <ttft.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;

namespace {

// ------------------------------------------------------------ simulation
/* The virtual clock: a steady_clock time point that moves only when the
 * simulated GPU works. */
struct VirtualClock {
  std::chrono::steady_clock::time_point t = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point now() const { return t; }
  void advance(std::chrono::nanoseconds d) { t += d; }
};

/* One simulated client request. */
struct Incoming {
  std::chrono::milliseconds arrives;  // after the start
  std::uint32_t prompt_tokens;
  std::uint32_t n_predict;
  bool chat;                          // class "chat" or "batch"
  int disconnect_after = -1;          // client goes away after this many tokens
  bool disconnect_while_queued = false;
  bool speculative = false;           // draft model: several tokens per step
  bool sampler_throws = false;        // a server-side failure mid-stream
  int system_prompt = 0;              // requests with the same one share a prompt prefix
};

constexpr std::uint32_t kContext = 4096;     // per-slot context
constexpr std::uint32_t kBatchTokens = 512;  // prompt tokens per step (n_batch)

// ------------------------------------------------------------------ server
/* A task as the HTTP handler posts it. The Stream is begun in the handler,
 * at arrival, so queueing for a slot counts in TTFT; it moves with the
 * task into the slot. */
struct Task {
  int id;
  Incoming in;
  ttft::Stream stream;
};

enum class SlotState { idle, processing_prompt, generating };

struct Slot {
  int id;
  SlotState state = SlotState::idle;
  Task task{0, {}, {}};
  std::uint32_t n_prompt_done = 0;
  std::uint32_t n_decoded = 0;     // tokens produced by the model
  std::uint32_t n_held = 0;        // decoded but not yet visible (partial UTF-8)
  std::uint32_t n_sent = 0;        // tokens visible to the client
  std::string pending;             // text waiting for a complete character
  int cached_system_prompt = -1;   // what the slot's KV cache still holds
  bool finished = false;           // ends after this step's emissions are recorded
  ttft_status end_status = TTFT_COMPLETED;
};

class Server {
 public:
  Server(ttft::Registry &reg, ttft::Class chat, ttft::Class batch, int n_slots)
      : reg_(reg), chat_(chat), batch_(batch), slots_(static_cast<std::size_t>(n_slots)) {
    for (int i = 0; i < n_slots; i++) slots_[static_cast<std::size_t>(i)].id = i;
  }

  /* The HTTP handler: the request has arrived. begin() never throws and
   * never allocates; when every sequence slot of the registry is taken it
   * returns an empty Stream and the request is still served, unmeasured
   * (and counted as DROPPED). */
  void handle_completion(int id, const Incoming &in) {
    ttft::Stream s = reg_.begin(ttft::Request()
                                    .cls(in.chat ? chat_ : batch_)
                                    .prompt_tokens(in.prompt_tokens)
                                    .prefix_unknown(),
                                clock.now());
    queue_.push_back(Task{id, in, std::move(s)});
  }

  /* A client closed its connection while its task still waited for a slot:
   * drop the task. CANCELLED before the first token is counted as abandoned,
   * with how long it waited. With the real clock, erasing the task is all it
   * takes (the Stream's destructor ends it at the library's now); with this
   * virtual clock, which runs ahead of the real one, end it explicitly at
   * virtual now, or the library would see time go backwards (it clamps and
   * counts that as CLOCK_CLAMPED). */
  void client_gone_while_queued(int id) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->id == id) {
        it->stream.end(TTFT_CANCELLED, clock.now());
        queue_.erase(it);
        return;
      }
    }
  }

  bool busy() const {
    if (!queue_.empty()) return true;
    for (const Slot &s : slots_)
      if (s.state != SlotState::idle) return true;
    return false;
  }

  /* One iteration of the main loop (llama.cpp: update_slots). */
  void update_slots() {
    const auto t_start = clock.now();  // batch building starts the engine step
    launch_queued_tasks();
    std::uint32_t batch_tokens = 0;
    ttft_step_info info;
    ttft_step_info_init(&info);
    for (Slot &slot : slots_) {
      if (slot.state == SlotState::processing_prompt) {
        const std::uint32_t n = std::min(kBatchTokens, slot.task.in.prompt_tokens - slot.n_prompt_done);
        slot.n_prompt_done += n;
        batch_tokens += n;
        info.prefill_tokens += n;
      } else if (slot.state == SlotState::generating) {
        batch_tokens += 1;
        info.decode_seqs++;
      }
    }
    if (batch_tokens == 0) return;  // an idle pass: no step
    // The forward pass of the whole batch.
    clock.advance(12ms + std::chrono::microseconds(20) * batch_tokens);
    // The step ends with the forward pass, before sampling and sending:
    // a token must never be recorded before the step that produced it.
    reg_.engine_step(info, t_start, clock.now());
    step_seqs_.clear();
    step_tokens_.clear();
    for (Slot &slot : slots_) {
      try {
        step_slot(slot);
      } catch (const std::exception &e) {
        // A server-side failure: say so explicitly. (Were the exception to
        // escape and the Stream be destroyed, it would count as CANCELLED.)
        std::printf("  slot %d: task %d failed: %s\n", slot.id, slot.task.id, e.what());
        slot.task.stream.end(TTFT_ERROR, clock.now());
        release(slot);
      }
    }
    // Everything that became visible in this step, in one call (one clock
    // read when the time is omitted); then the ends of the streams this
    // step finished, which must come after their last tokens.
    if (!step_seqs_.empty()) {
      const long accepted = reg_.step_emitted(step_seqs_, step_tokens_, clock.now());
      if (accepted != static_cast<long>(step_seqs_.size()))
        std::printf("  step: %ld of %zu emissions accepted\n", accepted, step_seqs_.size());
    }
    for (Slot &slot : slots_) {
      if (!slot.finished) continue;
      slot.task.stream.end(slot.end_status, clock.now());
      release(slot);
    }
  }

  VirtualClock clock;

 private:
  void launch_queued_tasks() {
    for (Slot &slot : slots_) {
      if (slot.state != SlotState::idle || queue_.empty()) continue;
      Task task = std::move(queue_.front());
      queue_.pop_front();
      if (task.in.prompt_tokens + task.in.n_predict > kContext) {
        // Rejected before any work: the stream ends as ERROR.
        std::printf("  task %d: prompt too long, rejected\n", task.id);
        task.stream.end(TTFT_ERROR, clock.now());
        continue;
      }
      slot.task = std::move(task);
      slot.state = SlotState::processing_prompt;
      slot.n_prompt_done = slot.n_decoded = slot.n_held = slot.n_sent = 0;
      slot.pending.clear();
      slot.finished = false;
      // First admission: queue time ends, prefill starts. Only now is it
      // known whether the slot's cache holds the prompt's prefix.
      slot.task.stream.mark_scheduled(clock.now());
      const bool reused = slot.cached_system_prompt == slot.task.in.system_prompt;
      slot.task.stream.annotate(0, reused);
      slot.cached_system_prompt = slot.task.in.system_prompt;
      if (reused) slot.n_prompt_done = std::min(kBatchTokens, slot.task.in.prompt_tokens - 1);
    }
  }

  void step_slot(Slot &slot) {
    if (slot.state == SlotState::processing_prompt) {
      if (slot.n_prompt_done < slot.task.in.prompt_tokens) return;
      slot.state = SlotState::generating;  // the last prompt chunk also samples a token
    } else if (slot.state != SlotState::generating) {
      return;
    }
    // Sample: one token, or with a draft model 1..3 accepted tokens.
    std::uint32_t n = 1;
    if (slot.task.in.speculative) n = 1 + slot.n_decoded % 3;
    n = std::min(n, slot.task.in.n_predict - slot.n_decoded);
    if (slot.task.in.sampler_throws && slot.n_decoded >= 4) throw std::runtime_error("sampler failed");
    for (std::uint32_t i = 0; i < n; i++) {
      const std::uint32_t k = slot.n_decoded++;
      // Every 4th token is the first half of a multi-byte character: the
      // detokenizer holds it until the next token completes the text.
      slot.pending += (k % 4 == 3) ? "\xC3" : (k % 4 == 0 && k > 0 ? "\xA9" : "a");
      slot.n_held++;
    }
    flush_to_client(slot);
    const bool done = slot.n_decoded >= slot.task.in.n_predict;
    const bool gone = slot.task.in.disconnect_after >= 0 &&
                      slot.n_sent >= static_cast<std::uint32_t>(slot.task.in.disconnect_after);
    if (gone) {
      // The client disconnected (the HTTP write failed): CANCELLED, after
      // this step's emissions (just letting the Stream go would also
      // record CANCELLED).
      slot.finished = true;
      slot.end_status = TTFT_CANCELLED;
    } else if (done) {
      if (slot.n_held > 0) {  // flush whatever the detokenizer still holds
        emit(slot, slot.n_held);
        slot.n_held = 0;
      }
      slot.finished = true;
      slot.end_status = TTFT_COMPLETED;
    }
  }

  /* n tokens of the slot are visible now: part of this step's call. */
  void emit(Slot &slot, std::uint32_t n) {
    if (n == 0) return;
    if (!step_seqs_.empty() && step_seqs_.back() == slot.task.stream.handle()) {
      step_tokens_.back() += n;  // one emission per slot and step
    } else {
      step_seqs_.push_back(slot.task.stream.handle());
      step_tokens_.push_back(n);
    }
    slot.n_sent += n;
  }

  /* Send what is printable; the tokens it carries become visible now.
   * This, not the sampler, is where the hook goes: TTFT is what the user
   * sees. */
  void flush_to_client(Slot &slot) {
    if (slot.pending.empty() || static_cast<unsigned char>(slot.pending.back()) == 0xC3) return;
    const std::uint32_t visible = slot.n_held;
    slot.pending.clear();  // (the SSE write of the text would be here)
    slot.n_held = 0;
    emit(slot, visible);
  }

  void release(Slot &slot) {
    slot.state = SlotState::idle;
    slot.task.stream = ttft::Stream();  // already ended; nothing is recorded
  }

  ttft::Registry &reg_;
  ttft::Class chat_, batch_;
  std::vector<Slot> slots_;
  std::deque<Task> queue_;
  std::vector<ttft_seq> step_seqs_;          // this step's emissions
  std::vector<std::uint32_t> step_tokens_;
};

int expect(const char *what, std::uint64_t actual, std::uint64_t expected) {
  if (actual == expected) return 0;
  std::fprintf(stderr, "slot_server: %s: expected %llu, actual %llu\n", what,
               static_cast<unsigned long long>(expected), static_cast<unsigned long long>(actual));
  return 1;
}

}  // namespace

int main() {
  ttft::Registry reg(ttft::Config()
                         .max_inflight(64)
                         .model("sim-7b")
                         .start_point("server_arrival")
                         .token_point("detokenized_flush")
                         .stall_threshold(100ms));
  const ttft::Class chat = reg.add_class("chat", ttft::Slo().ttft(300ms).tpot(40ms));
  const ttft::Class batch = reg.add_class("batch", ttft::Slo().e2e(10s));

  Server server(reg, chat, batch, 3);
  std::vector<Incoming> load = {
      {0ms, 200, 24, true},
      {5ms, 1800, 16, true},
      {10ms, 600, 40, false},
      {20ms, 100, 30, true, /*disconnect_after=*/8},
      {30ms, 300, 20, true, -1, /*disconnect_while_queued=*/true},
      {40ms, 400, 33, true, -1, false, /*speculative=*/true, false, /*system_prompt=*/1},
      {50ms, 4000, 200, false},  // longer than the context: rejected
      {60ms, 250, 12, true, -1, false, false, /*sampler_throws=*/true},
  };

  const auto start = server.clock.now();
  std::size_t next = 0;
  while (next < load.size() || server.busy()) {
    // Deliver every request that has arrived by now (the HTTP threads).
    while (next < load.size() && start + load[next].arrives <= server.clock.now()) {
      server.handle_completion(static_cast<int>(next), load[next]);
      if (load[next].disconnect_while_queued) server.client_gone_while_queued(static_cast<int>(next));
      next++;
    }
    if (!server.busy() && next < load.size()) {
      server.clock.t = start + load[next].arrives;  // idle until the next arrival
      continue;
    }
    server.update_slots();
  }

  ttft::Snapshot snap = reg.snapshot();
  std::fputs(snap.format(TTFT_FORMAT_TEXT).c_str(), stdout);

  int bad = 0;
  bad += expect("begun", snap.counter(TTFT_COUNTER_BEGUN), 8);
  bad += expect("completed", snap.counter(TTFT_COUNTER_COMPLETED), 4);
  bad += expect("cancelled", snap.counter(TTFT_COUNTER_CANCELLED), 2);
  bad += expect("abandoned", snap.counter(TTFT_COUNTER_ABANDONED), 1);
  bad += expect("errors", snap.counter(TTFT_COUNTER_ERRORS), 2);
  bad += expect("clock clamps", snap.counter(TTFT_COUNTER_CLOCK_CLAMPED), 0);
  bad += expect("inflight", static_cast<std::uint64_t>(reg.inflight()), 0);
  // Tokens the clients saw: 24 + 16 + 40 + 8 + 33 + 4 (before the failure).
  bad += expect("tokens", snap.counter(TTFT_COUNTER_TOKENS), 125);
  bad += expect("ttft observations", snap.count(TTFT_METRIC_TTFT), 6);
  // Slots keep their last prompt: tasks 3 and 7 found system prompt 0 in
  // the slot they got (a prefix-cache hit, annotated at pickup); 0, 1, 2
  // came to empty slots and task 5 brought another system prompt.
  bad += expect("prefix hits", snap.split_count(TTFT_SPLIT_PREFIX_CACHE, 1), 2);
  bad += expect("prefix misses", snap.split_count(TTFT_SPLIT_PREFIX_CACHE, 0), 4);
  bad += expect("stale hook calls", snap.counter(TTFT_COUNTER_STALE), 0);
  // One engine step per pass that ran the model: 8 carried prompt chunks,
  // 38 only decodes.
  bad += expect("engine steps with prefill", snap.engine_step_count(true), 8);
  bad += expect("engine steps without prefill", snap.engine_step_count(false), 38);
  std::printf("chat TTFT p50 %.1f ms, p99 %.1f ms; TPOT p50 %.1f ms; attainment %.2f\n",
              std::chrono::duration<double, std::milli>(snap.quantile(TTFT_METRIC_TTFT, 0.5, chat)).count(),
              std::chrono::duration<double, std::milli>(snap.quantile(TTFT_METRIC_TTFT, 0.99, chat)).count(),
              std::chrono::duration<double, std::milli>(snap.quantile(TTFT_METRIC_TPOT, 0.5, chat)).count(),
              snap.attainment(chat).value_or(-1.0));
  return bad == 0 ? 0 : 1;
}
