#include "trainer/seqlen_balancing.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "common/error.h"

namespace verl::trainer {
namespace {

// One set of a Karmarkar-Karp state: (index, value) items and their sum.
struct KkSet {
  int64_t sum = 0;
  std::vector<std::pair<int64_t, int64_t>> items;
};

// verl's Set.__lt__: by sum, then item count, then the items themselves.
bool set_less(const KkSet& a, const KkSet& b) {
  if (a.sum != b.sum) return a.sum < b.sum;
  if (a.items.size() != b.items.size()) return a.items.size() < b.items.size();
  return a.items < b.items;
}

// k sets, kept in decreasing order.
struct KkState {
  std::vector<KkSet> sets;
  int64_t spread() const { return sets.front().sum - sets.back().sum; }
  void sort_sets() { std::sort(sets.begin(), sets.end(), [](const KkSet& a, const KkSet& b) { return set_less(b, a); }); }
};

// Heap order: the state with the largest spread comes out first; on a tie, the one whose
// largest set is larger (verl's State.__lt__).
bool lower_priority(const KkState& a, const KkState& b) {
  if (a.spread() != b.spread()) return a.spread() < b.spread();
  return set_less(a.sets.front(), b.sets.front());
}

}  // namespace

int64_t sequence_workload(int64_t seqlen) { return 24576 * seqlen + seqlen * seqlen; }

std::vector<std::vector<int64_t>> karmarkar_karp(const std::vector<int64_t>& values, int64_t k) {
  const auto n = static_cast<int64_t>(values.size());
  if (k < 1 || k > n) {
    throw Error{ExitCode::kFailure,
                "karmarkar_karp: " + std::to_string(n) + " items cannot fill " + std::to_string(k) + " partitions", ""};
  }
  std::vector<std::pair<int64_t, int64_t>> sorted;  // (value, index) ascending, as verl
  for (int64_t i = 0; i < n; ++i) sorted.emplace_back(values[static_cast<size_t>(i)], i);
  std::sort(sorted.begin(), sorted.end());
  std::vector<KkState> heap;
  heap.reserve(sorted.size());
  for (const auto& [value, index] : sorted) {
    KkState s;
    s.sets.resize(static_cast<size_t>(k));
    s.sets[0].sum = value;
    s.sets[0].items.emplace_back(index, value);
    s.sort_sets();
    heap.push_back(std::move(s));
    std::push_heap(heap.begin(), heap.end(), lower_priority);
  }
  // Largest differencing: merge the two most uneven states, the largest set of one with the
  // smallest of the other, until one state is left.
  while (heap.size() > 1) {
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    KkState a = std::move(heap.back());
    heap.pop_back();
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    KkState b = std::move(heap.back());
    heap.pop_back();
    for (size_t i = 0; i < a.sets.size(); ++i) {
      auto& dst = a.sets[i];
      const auto& src = b.sets[a.sets.size() - 1 - i];
      dst.sum += src.sum;
      dst.items.insert(dst.items.end(), src.items.begin(), src.items.end());
    }
    a.sort_sets();
    heap.push_back(std::move(a));
    std::push_heap(heap.begin(), heap.end(), lower_priority);
  }
  std::vector<std::vector<int64_t>> out;
  for (const auto& set : heap.front().sets) {
    std::vector<int64_t> part;
    for (const auto& item : set.items) part.push_back(item.first);
    std::sort(part.begin(), part.end());
    out.push_back(std::move(part));
  }
  return out;
}

int64_t count_micro_batches(const std::vector<int64_t>& seq_lens, int64_t max_token_len, int64_t min_micro_batches) {
  const auto rows = static_cast<int64_t>(seq_lens.size());
  const int64_t total = std::accumulate(seq_lens.begin(), seq_lens.end(), int64_t{0});
  const int64_t needed = max_token_len > 0 ? (total + max_token_len - 1) / max_token_len : rows;
  return std::min(rows, std::max(needed, min_micro_batches));
}

std::vector<std::vector<int64_t>> rearrange_micro_batches(const std::vector<int64_t>& seq_lens,
                                                          int64_t max_token_len, const std::string& budget_key,
                                                          int64_t min_micro_batches) {
  if (max_token_len <= 0) {
    throw Error{ExitCode::kInvalidConfig,
                "job config: key '" + budget_key + "' is " + std::to_string(max_token_len) + ", must be > 0",
                "a micro-batch's token budget per GPU, e.g. 16384"};
  }
  for (size_t i = 0; i < seq_lens.size(); ++i) {
    if (seq_lens[i] > max_token_len) {
      throw Error{ExitCode::kInvalidConfig,
                  "job config: key '" + budget_key + "' is " + std::to_string(max_token_len) +
                      " tokens, but row " + std::to_string(i) + " of the batch holds " + std::to_string(seq_lens[i]) +
                      " tokens (prompt + response)",
                  "raise " + budget_key + " to at least data.max_prompt_length + data.max_response_length "
                  "(verl asserts max_token_len >= the longest sequence)"};
    }
  }
  if (seq_lens.empty()) return {};
  const int64_t k = count_micro_batches(seq_lens, max_token_len, min_micro_batches);
  std::vector<int64_t> workloads;
  for (int64_t len : seq_lens) workloads.push_back(sequence_workload(len));
  auto parts = karmarkar_karp(workloads, k);
  // verl's use_dynamic_bsz_balance: heaviest first, then the light ones moved to both ends
  // (parts[::2][::-1] + parts[1::2]), which shortens a pipeline's warm-up and cool-down.
  auto weight = [&](const std::vector<int64_t>& p) {
    int64_t w = 0;
    for (int64_t i : p) w += workloads[static_cast<size_t>(i)];
    return w;
  };
  std::sort(parts.begin(), parts.end(), [&](const auto& a, const auto& b) {
    const int64_t wa = weight(a), wb = weight(b);
    if (wa != wb) return wa > wb;
    return a.front() > b.front();
  });
  std::vector<std::vector<int64_t>> even, odd;
  for (size_t i = 0; i < parts.size(); ++i) (i % 2 == 0 ? even : odd).push_back(std::move(parts[i]));
  std::reverse(even.begin(), even.end());
  even.insert(even.end(), std::make_move_iterator(odd.begin()), std::make_move_iterator(odd.end()));
  return even;
}

std::vector<int64_t> restore_order(const std::vector<std::vector<int64_t>>& partitions) {
  size_t rows = 0;
  for (const auto& p : partitions) rows += p.size();
  std::vector<int64_t> out(rows, -1);
  int64_t pos = 0;
  for (const auto& p : partitions) {
    for (int64_t row : p) out[static_cast<size_t>(row)] = pos++;
  }
  return out;
}

}  // namespace verl::trainer
