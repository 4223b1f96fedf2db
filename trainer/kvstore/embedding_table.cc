#include "trainer/kvstore/embedding_table.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "trainer/base/check.h"
#include "trainer/base/random.h"

namespace cohort {

void RowSum::Add(absl::Span<const uint64_t> ids, absl::Span<const float> grads) {
  for (size_t i = 0; i < ids.size(); ++i) {
    const float* g = grads.data() + i * dim_;
    auto [it, fresh] = index_.try_emplace(ids[i], rows_.ids.size());
    if (fresh) {
      rows_.ids.push_back(ids[i]);
      rows_.grads.insert(rows_.grads.end(), g, g + dim_);
    } else {
      float* to = rows_.grads.data() + it->second * dim_;
      for (size_t k = 0; k < dim_; ++k) to[k] += g[k];
    }
  }
}

void RowSum::Scale(float factor) {
  for (float& g : rows_.grads) g *= factor;
}

EmbeddingTable::EmbeddingTable(TableSpec spec, const RowOptimizer* rule)
    : spec_(std::move(spec)),
      name_hash_(HashName(spec_.name)),
      rule_(rule),
      stride_(spec_.dim * (1 + rule->state_floats())) {
  COHORT_CHECK(spec_.dim > 0 && (spec_.kind != TableSpec::Kind::kFixed || spec_.rows > 0),
               "table %s: dim %ld, rows %ld", spec_.name.c_str(), spec_.dim, spec_.rows);
}

uint64_t EmbeddingTable::KeyOf(uint64_t id) const {
  return spec_.kind == TableSpec::Kind::kFixed ? id % static_cast<uint64_t>(spec_.rows) : id;
}

void EmbeddingTable::InitialValues(uint64_t key, absl::Span<float> out) const {
  const uint64_t row = MixKeys({spec_.seed, name_hash_, key});
  for (size_t i = 0; i < out.size(); ++i) {
    const double unit = static_cast<double>(MixBits(row + i) >> 11) * 0x1.0p-53;  // [0, 1)
    out[i] = static_cast<float>((2 * unit - 1) * spec_.init_scale);
  }
}

int64_t EmbeddingTable::SlotOf(uint64_t key) const {
  auto it = slots_.find(key);
  return it == slots_.end() ? -1 : it->second;
}

float* EmbeddingTable::Row(int64_t slot) const {
  return blocks_[slot / kRowsPerBlock].get() + (slot % kRowsPerBlock) * stride_;
}

int64_t EmbeddingTable::NewRow(uint64_t key) {
  const int64_t slot = static_cast<int64_t>(keys_.size());
  if (slot % kRowsPerBlock == 0) {
    blocks_.push_back(std::make_unique<float[]>(kRowsPerBlock * stride_));
  }
  keys_.push_back(key);
  slots_.emplace(key, slot);
  float* row = Row(slot);
  InitialValues(key, absl::MakeSpan(row, spec_.dim));
  rule_->InitState(absl::MakeSpan(row + spec_.dim, stride_ - spec_.dim));
  return slot;
}

absl::Status EmbeddingTable::Pull(absl::Span<const uint64_t> ids, absl::Span<float> out) const {
  const size_t dim = static_cast<size_t>(spec_.dim);
  if (out.size() != ids.size() * dim) {
    return absl::InvalidArgumentError(absl::StrCat("table ", spec_.name, ": ", out.size(),
                                                   " floats for ", ids.size(), " rows of ", dim));
  }
  absl::ReaderMutexLock lock(&mu_);
  for (size_t i = 0; i < ids.size(); ++i) {
    const uint64_t key = KeyOf(ids[i]);
    const absl::Span<float> to = out.subspan(i * dim, dim);
    if (const int64_t slot = SlotOf(key); slot >= 0) {
      std::memcpy(to.data(), Row(slot), dim * sizeof(float));
    } else if (spec_.kind == TableSpec::Kind::kFixed || spec_.admit_after <= 1) {
      InitialValues(key, to);
    } else {
      std::fill(to.begin(), to.end(), 0.0f);
    }
  }
  return absl::OkStatus();
}

absl::Status EmbeddingTable::Apply(absl::Span<const uint64_t> ids, absl::Span<const float> grads,
                                   float lr) {
  const size_t dim = static_cast<size_t>(spec_.dim);
  if (grads.size() != ids.size() * dim) {
    return absl::InvalidArgumentError(absl::StrCat("table ", spec_.name, ": ", grads.size(),
                                                   " gradient floats for ", ids.size(), " rows of ",
                                                   dim));
  }
  // One gradient a row: ids that share a row (a fixed table's ids modulo its rows, or an id
  // given twice) are summed in the order given, as PyTorch coalesces a sparse gradient.
  std::vector<uint64_t> keys(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) keys[i] = KeyOf(ids[i]);
  RowSum sum(spec_.dim);
  sum.Add(keys, grads);
  const RankRows& rows = sum.rows();
  absl::MutexLock lock(&mu_);
  // Which rows the step creates, checked against the limit before anything changes.
  const bool filtered = spec_.kind == TableSpec::Kind::kCollisionless && spec_.admit_after > 1;
  std::vector<int64_t> slots(rows.ids.size());
  std::vector<char> admitted(rows.ids.size(), 1);
  int64_t created = 0;
  for (size_t i = 0; i < rows.ids.size(); ++i) {
    slots[i] = SlotOf(rows.ids[i]);
    if (slots[i] >= 0) continue;
    if (filtered) {
      auto it = sightings_.find(rows.ids[i]);
      admitted[i] = (it != sightings_.end() ? it->second : 0) + 1 >= spec_.admit_after;
    }
    created += admitted[i];
  }
  const int64_t held = static_cast<int64_t>(keys_.size());
  if (spec_.kind == TableSpec::Kind::kCollisionless && spec_.rows > 0 &&
      held + created > spec_.rows) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "table ", spec_.name, " on this shard holds ", held, " rows, and step ", steps_ + 1,
        " would add ", created, " more past its limit of ", spec_.rows,
        ": raise the table's row limit, spread it over more shards, or filter rare ids "
        "(admit_after)"));
  }
  ++steps_;
  for (size_t i = 0; i < rows.ids.size(); ++i) {
    int64_t slot = slots[i];
    if (slot < 0 && !admitted[i]) {
      ++sightings_[rows.ids[i]];
      continue;
    }
    if (slot < 0) {
      if (filtered) sightings_.erase(rows.ids[i]);
      slot = NewRow(rows.ids[i]);
    }
    float* row = Row(slot);
    rule_->ApplyRow(absl::MakeSpan(row, dim), absl::MakeConstSpan(rows.grads).subspan(i * dim, dim),
                    absl::MakeSpan(row + dim, stride_ - dim), lr, steps_);
  }
  return absl::OkStatus();
}

int64_t EmbeddingTable::steps() const {
  absl::ReaderMutexLock lock(&mu_);
  return steps_;
}

int64_t EmbeddingTable::rows_held() const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int64_t>(keys_.size());
}

int64_t EmbeddingTable::bytes_held() const {
  absl::ReaderMutexLock lock(&mu_);
  return static_cast<int64_t>(blocks_.size()) * kRowsPerBlock * stride_ *
         static_cast<int64_t>(sizeof(float));
}

void EmbeddingTable::ForEachRow(const std::function<void(uint64_t, absl::Span<const float>,
                                                         absl::Span<const float>)>& visit) const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<std::pair<uint64_t, int64_t>> order;
  order.reserve(keys_.size());
  for (size_t slot = 0; slot < keys_.size(); ++slot) {
    order.emplace_back(keys_[slot], static_cast<int64_t>(slot));
  }
  std::sort(order.begin(), order.end());
  for (const auto& [key, slot] : order) {
    const float* row = Row(slot);
    visit(key, absl::MakeConstSpan(row, spec_.dim),
          absl::MakeConstSpan(row + spec_.dim, stride_ - spec_.dim));
  }
}

TableSnapshot EmbeddingTable::Snapshot() const {
  TableSnapshot s;
  ForEachRow([&](uint64_t key, absl::Span<const float> values, absl::Span<const float> state) {
    s.keys.push_back(key);
    s.values.insert(s.values.end(), values.begin(), values.end());
    s.state.insert(s.state.end(), state.begin(), state.end());
  });
  absl::ReaderMutexLock lock(&mu_);
  s.steps = steps_;
  std::vector<std::pair<uint64_t, int>> sighted(sightings_.begin(), sightings_.end());
  std::sort(sighted.begin(), sighted.end());
  for (const auto& [id, n] : sighted) {
    s.sighted.push_back(id);
    s.sightings.push_back(n);
  }
  return s;
}

absl::Status EmbeddingTable::Restore(const TableSnapshot& s) {
  const size_t n = s.keys.size();
  const size_t dim = static_cast<size_t>(spec_.dim);
  const size_t state_floats = static_cast<size_t>(stride_) - dim;
  bool ascending = true;
  for (size_t i = 1; i < n; ++i) ascending = ascending && s.keys[i - 1] < s.keys[i];
  for (size_t i = 1; i < s.sighted.size(); ++i) {
    ascending = ascending && s.sighted[i - 1] < s.sighted[i];
  }
  const bool limited = spec_.kind == TableSpec::Kind::kCollisionless && spec_.rows > 0;
  if (s.values.size() != n * dim || s.state.size() != n * state_floats || !ascending ||
      s.sightings.size() != s.sighted.size() || s.steps < 0 ||
      (limited && static_cast<int64_t>(n) > spec_.rows)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table ", spec_.name, ": a snapshot of ", n, " rows (", s.values.size(), " values, ",
        s.state.size(), " state floats", ascending ? "" : ", keys out of order",
        "), where this table's rows have ", dim, " values and ", state_floats, " state floats",
        limited ? absl::StrCat(", at most ", spec_.rows, " of them") : "",
        ": it was written for another table or rule"));
  }
  absl::MutexLock lock(&mu_);
  steps_ = s.steps;
  slots_.clear();
  keys_.clear();
  blocks_.clear();
  sightings_.clear();
  for (size_t i = 0; i < n; ++i) {
    float* row = Row(NewRow(s.keys[i]));
    std::copy_n(s.values.data() + i * dim, dim, row);
    std::copy_n(s.state.data() + i * state_floats, state_floats, row + dim);
  }
  for (size_t i = 0; i < s.sighted.size(); ++i) sightings_[s.sighted[i]] = s.sightings[i];
  return absl::OkStatus();
}

}  // namespace cohort
