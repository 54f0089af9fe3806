// Hand-built record batches for the assembly's tests and fuzzer (no Arrow
// here, as in the library). Test-only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "icefloe/client/arrow_c_abi.h"

namespace icefloe_testing {

// Hand-built C Data Interface arrays (no Arrow here, as in the library): a
// record batch of three columns, row r of the table holding
//   id:   int32 r * 3
//   name: utf8 "row <r>", null when r % 5 == 0
//   toks: list<int32> of r % 4 values r, r + 1, ...
// The release callbacks count how many arrays were released.
inline int released = 0;

struct Column {
  std::vector<uint8_t> validity;
  std::vector<int32_t> offsets;
  std::vector<uint8_t> bytes;  // values: int32s or characters
  std::vector<const void*> buffers;
  std::vector<ArrowArray*> children;
  std::unique_ptr<Column> child;
  ArrowArray array{};
};

inline void Released(ArrowArray* a) {
  ++released;
  a->release = nullptr;
}

inline void Finish(Column* c, int64_t length, int64_t null_count,
                   std::vector<const void*> buffers) {
  c->buffers = std::move(buffers);
  c->array = ArrowArray{length,   null_count, 0,       static_cast<int64_t>(c->buffers.size()),
                        0,        nullptr,    nullptr, nullptr,
                        Released, nullptr};
  c->array.buffers = c->buffers.data();
  if (c->child) {
    c->children = {&c->child->array};
    c->array.n_children = 1;
    c->array.children = c->children.data();
  }
}

// One piece's batch: the table's rows `rows`, in that order.
struct Batch {
  Column id, name, toks;
  std::vector<ArrowArray*> columns;
  ArrowArray array{};
  std::vector<const void*> buffers{nullptr};
};

inline std::unique_ptr<Batch> MakeBatch(const std::vector<uint32_t>& rows) {
  auto b = std::make_unique<Batch>();
  const auto n = static_cast<int64_t>(rows.size());
  // id
  for (uint32_t r : rows) {
    const int32_t v = static_cast<int32_t>(r * 3);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b->id.bytes.insert(b->id.bytes.end(), p, p + 4);
  }
  Finish(&b->id, n, 0, {nullptr, b->id.bytes.data()});
  // name, with nulls
  b->name.validity.assign(static_cast<size_t>((n + 7) / 8 + 1), 0);
  b->name.offsets.push_back(0);
  int64_t nulls = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t r = rows[static_cast<size_t>(i)];
    if (r % 5 == 0) {
      ++nulls;
    } else {
      b->name.validity[static_cast<size_t>(i / 8)] |= static_cast<uint8_t>(1u << (i % 8));
      const std::string s = "row " + std::to_string(r);
      b->name.bytes.insert(b->name.bytes.end(), s.begin(), s.end());
    }
    b->name.offsets.push_back(static_cast<int32_t>(b->name.bytes.size()));
  }
  b->name.bytes.push_back(0);  // never empty
  Finish(&b->name, n, nulls,
         {b->name.validity.data(), b->name.offsets.data(), b->name.bytes.data()});
  // toks
  b->toks.child = std::make_unique<Column>();
  b->toks.offsets.push_back(0);
  int64_t values = 0;
  for (uint32_t r : rows) {
    for (uint32_t k = 0; k < r % 4; ++k, ++values) {
      const int32_t v = static_cast<int32_t>(r + k);
      const auto* p = reinterpret_cast<const uint8_t*>(&v);
      b->toks.child->bytes.insert(b->toks.child->bytes.end(), p, p + 4);
    }
    b->toks.offsets.push_back(static_cast<int32_t>(values));
  }
  b->toks.child->bytes.resize(b->toks.child->bytes.size() + 4);  // never empty
  Finish(b->toks.child.get(), values, 0, {nullptr, b->toks.child->bytes.data()});
  Finish(&b->toks, n, 0, {nullptr, b->toks.offsets.data()});
  b->columns = {&b->id.array, &b->name.array, &b->toks.array};
  b->array =
      ArrowArray{n, 0, 0, 1, 3, b->buffers.data(), b->columns.data(), nullptr, Released, nullptr};
  return b;
}

// The batch's schema.
struct Schema {
  ArrowSchema id{"i", "id", nullptr, 0, 0, nullptr, nullptr, nullptr, nullptr};
  ArrowSchema name{"u", "name", nullptr, 2, 0, nullptr, nullptr, nullptr, nullptr};
  ArrowSchema item{"i", "item", nullptr, 0, 0, nullptr, nullptr, nullptr, nullptr};
  std::vector<ArrowSchema*> item_list{&item};
  ArrowSchema toks{"+l", "toks", nullptr, 0, 1, item_list.data(), nullptr, nullptr, nullptr};
  std::vector<ArrowSchema*> fields{&id, &name, &toks};
  ArrowSchema batch{"+s", "", nullptr, 0, 3, fields.data(), nullptr, nullptr, nullptr};
};

}  // namespace icefloe_testing
