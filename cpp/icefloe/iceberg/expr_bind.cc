// Bind, Normalize and the BoundExpr helpers.
#include <algorithm>
#include <utility>

#include "icefloe/iceberg/expr.h"
#include "icefloe/iceberg/expr_internal.h"

namespace icefloe::iceberg {

ExprOp Negate(ExprOp op) {
  switch (op) {
    case ExprOp::kTrue:
      return ExprOp::kFalse;
    case ExprOp::kFalse:
      return ExprOp::kTrue;
    case ExprOp::kAnd:
      return ExprOp::kOr;
    case ExprOp::kOr:
      return ExprOp::kAnd;
    case ExprOp::kNot:
      return ExprOp::kNot;
    case ExprOp::kEq:
      return ExprOp::kNe;
    case ExprOp::kNe:
      return ExprOp::kEq;
    case ExprOp::kLt:
      return ExprOp::kGe;
    case ExprOp::kLe:
      return ExprOp::kGt;
    case ExprOp::kGt:
      return ExprOp::kLe;
    case ExprOp::kGe:
      return ExprOp::kLt;
    case ExprOp::kIn:
      return ExprOp::kNotIn;
    case ExprOp::kNotIn:
      return ExprOp::kIn;
    case ExprOp::kIsNull:
      return ExprOp::kNotNull;
    case ExprOp::kNotNull:
      return ExprOp::kIsNull;
    case ExprOp::kIsNan:
      return ExprOp::kNotNan;
    case ExprOp::kNotNan:
      return ExprOp::kIsNan;
    case ExprOp::kStartsWith:
      return ExprOp::kNotStartsWith;
    case ExprOp::kNotStartsWith:
      return ExprOp::kStartsWith;
  }
  return op;
}

ExprOp Flip(ExprOp op) {
  switch (op) {
    case ExprOp::kLt:
      return ExprOp::kGt;
    case ExprOp::kLe:
      return ExprOp::kGe;
    case ExprOp::kGt:
      return ExprOp::kLt;
    case ExprOp::kGe:
      return ExprOp::kLe;
    default:
      return op;
  }
}

BoundExpr BoundExpr::True() { return BoundExpr{}; }

BoundExpr BoundExpr::False() {
  BoundExpr e;
  e.op = Op::kFalse;
  return e;
}

BoundExpr BoundExpr::And(std::vector<BoundExpr> children) {
  BoundExpr e;
  e.op = Op::kAnd;
  e.children = std::move(children);
  return e;
}

BoundExpr BoundExpr::Or(std::vector<BoundExpr> children) {
  BoundExpr e;
  e.op = Op::kOr;
  e.children = std::move(children);
  return e;
}

BoundExpr BoundExpr::Not(BoundExpr child) {
  BoundExpr e;
  e.op = Op::kNot;
  e.children.push_back(std::move(child));
  return e;
}

BoundExpr BoundExpr::Compare(Op op, int32_t field_id, TypePtr type, Literal literal,
                             std::vector<std::string> column_path) {
  return Predicate(op, field_id, std::move(type), {std::move(literal)}, std::move(column_path));
}

BoundExpr BoundExpr::Predicate(Op op, int32_t field_id, TypePtr type, std::vector<Literal> literals,
                               std::vector<std::string> column_path) {
  BoundExpr e;
  e.op = op;
  e.field_id = field_id;
  e.type = std::move(type);
  e.literals = std::move(literals);
  e.column_path = std::move(column_path);
  return e;
}

bool BoundExpr::is_predicate() const { return op >= Op::kEq; }

std::string BoundExpr::column_name() const {
  if (column_path.empty()) return "field#" + std::to_string(field_id);
  std::string name;
  for (size_t i = 0; i < column_path.size(); ++i) name += (i ? "." : "") + column_path[i];
  return name;
}

std::string BoundExpr::ToString() const {
  std::vector<std::string> literal_text, child_text;
  for (const auto& l : literals) {
    const auto* s = std::get_if<std::string>(&l.value);
    if ((op == Op::kStartsWith || op == Op::kNotStartsWith) && s != nullptr) {
      literal_text.push_back(internal::QuoteString(*s + "%"));
    } else {
      literal_text.push_back(internal::FormatLiteral(l, type.get()));
    }
  }
  for (const auto& c : children) child_text.push_back(c.ToString());
  return internal::FormatNode(op, internal::QuoteColumn(column_name()), literal_text, child_text);
}

namespace internal {

arrow::Status ValidateTree(const BoundExpr& e) {
  using Op = ExprOp;
  switch (e.op) {
    case Op::kTrue:
    case Op::kFalse:
      return arrow::Status::OK();
    case Op::kNot:
      if (e.children.size() != 1) return arrow::Status::Invalid("NOT needs exactly one operand");
      [[fallthrough]];
    case Op::kAnd:
    case Op::kOr:
      for (const auto& c : e.children) ARROW_RETURN_NOT_OK(ValidateTree(c));
      return arrow::Status::OK();
    default:
      break;
  }
  if (e.type == nullptr || !e.type->is_primitive()) {
    return arrow::Status::Invalid("predicate ", OpName(e.op), " on field ", e.field_id,
                                  " needs a primitive type");
  }
  size_t want = 1;
  if (e.op == Op::kIn || e.op == Op::kNotIn) want = e.literals.size();
  if (e.op == Op::kIsNull || e.op == Op::kNotNull || e.op == Op::kIsNan || e.op == Op::kNotNan) {
    want = 0;
  }
  if (e.literals.size() != want) {
    return arrow::Status::Invalid("predicate ", OpName(e.op), " on field ", e.field_id, " has ",
                                  e.literals.size(), " literals, expected ", want);
  }
  for (const auto& l : e.literals) {
    if (l.is_null()) {
      return arrow::Status::Invalid("predicate ", OpName(e.op), " on field ", e.field_id,
                                    " has a null literal");
    }
  }
  if ((e.op == Op::kStartsWith || e.op == Op::kNotStartsWith) &&
      !std::holds_alternative<std::string>(e.literals[0].value)) {
    return arrow::Status::Invalid("LIKE on field ", e.field_id, " needs a string prefix");
  }
  return arrow::Status::OK();
}

bool IsFloating(const Type* type) {
  return type != nullptr && (type->id == TypeId::kFloat || type->id == TypeId::kDouble);
}

}  // namespace internal

namespace {

using Op = ExprOp;

bool FindPath(const std::vector<NestedField>& fields, int32_t id, std::vector<std::string>* path) {
  for (const auto& f : fields) {
    path->push_back(f.name);
    if (f.id == id) return true;
    if (f.type && f.type->id == TypeId::kStruct && FindPath(f.type->fields, id, path)) return true;
    path->pop_back();
  }
  return false;
}

std::string ColumnList(const Schema& schema) {
  constexpr size_t kMaxListed = 20;
  std::string out;
  for (size_t i = 0; i < schema.fields.size() && i < kMaxListed; ++i) {
    out += (i ? ", " : "") + schema.fields[i].name;
  }
  if (schema.fields.size() > kMaxListed) out += ", ...";
  return out;
}

arrow::Result<BoundExpr> BindPredicate(const Expr& e, const Schema& schema) {
  const NestedField* field = schema.FindByName(e.column);
  if (field == nullptr) {
    return arrow::Status::Invalid("unknown column '", e.column, "' at position ", e.position,
                                  " (columns: ", ColumnList(schema), ")");
  }
  if (field->type == nullptr || !field->type->is_primitive()) {
    return arrow::Status::Invalid(
        "column '", e.column, "' at position ", e.position, " is a ",
        field->type ? field->type->ToString() : "untyped field",
        "; filters apply to primitive columns only (name a struct's field as a.b)");
  }
  const Type& type = *field->type;
  if ((e.op == Op::kIsNan || e.op == Op::kNotNan) && !internal::IsFloating(&type)) {
    return arrow::Status::Invalid("IS NAN needs a float or double column; '", e.column,
                                  "' at position ", e.position, " is ", type.ToString());
  }
  if ((e.op == Op::kStartsWith || e.op == Op::kNotStartsWith) && type.id != TypeId::kString) {
    return arrow::Status::Invalid("LIKE needs a string column; '", e.column, "' at position ",
                                  e.position, " is ", type.ToString());
  }
  std::vector<std::string> path;
  FindPath(schema.fields, field->id, &path);
  std::vector<Literal> literals;
  for (const auto& parsed : e.literals) {
    ARROW_ASSIGN_OR_RAISE(Literal literal, internal::CoerceLiteral(parsed, type, e.column));
    literals.push_back(std::move(literal));
  }
  if (literals.size() > 1) {
    // IN sets: sorted, without duplicates. Coerced to one type, they all compare.
    auto cmp = [](const Literal& a, const Literal& b) {
      auto c = CompareLiterals(a, b);
      return c.ok() ? *c : 0;
    };
    std::stable_sort(literals.begin(), literals.end(),
                     [&](const Literal& a, const Literal& b) { return cmp(a, b) < 0; });
    literals.erase(std::unique(literals.begin(), literals.end(),
                               [&](const Literal& a, const Literal& b) { return cmp(a, b) == 0; }),
                   literals.end());
  }
  return BoundExpr::Predicate(e.op, field->id, field->type, std::move(literals), std::move(path));
}

arrow::Result<BoundExpr> BindNode(const Expr& e, const Schema& schema) {
  switch (e.op) {
    case Op::kTrue:
      return BoundExpr::True();
    case Op::kFalse:
      return BoundExpr::False();
    case Op::kAnd:
    case Op::kOr:
    case Op::kNot: {
      BoundExpr out;
      out.op = e.op;
      for (const auto& c : e.children) {
        ARROW_ASSIGN_OR_RAISE(BoundExpr child, BindNode(*c, schema));
        out.children.push_back(std::move(child));
      }
      return out;
    }
    default:
      return BindPredicate(e, schema);
  }
}

// AND/OR after rewriting the children: flattened, identities dropped,
// absorbing constants (FALSE in AND, TRUE in OR) winning.
BoundExpr Fold(Op op, std::vector<BoundExpr> children) {
  const Op identity = op == Op::kAnd ? Op::kTrue : Op::kFalse;
  const Op absorbing = op == Op::kAnd ? Op::kFalse : Op::kTrue;
  std::vector<BoundExpr> kept;
  for (auto& c : children) {
    if (c.op == absorbing) return c;
    if (c.op == identity) continue;
    if (c.op == op) {
      for (auto& grandchild : c.children) kept.push_back(std::move(grandchild));
    } else {
      kept.push_back(std::move(c));
    }
  }
  if (kept.empty()) return identity == Op::kTrue ? BoundExpr::True() : BoundExpr::False();
  if (kept.size() == 1) return std::move(kept[0]);
  return op == Op::kAnd ? BoundExpr::And(std::move(kept)) : BoundExpr::Or(std::move(kept));
}

BoundExpr RewritePredicate(BoundExpr e, bool negate) {
  const bool range = e.op == Op::kLt || e.op == Op::kLe || e.op == Op::kGt || e.op == Op::kGe;
  if (negate) e.op = Negate(e.op);
  const bool floating = internal::IsFloating(e.type.get());
  if (!floating && (e.op == Op::kIsNan || e.op == Op::kNotNan)) {
    return e.op == Op::kIsNan ? BoundExpr::False() : BoundExpr::True();
  }
  if (e.op == Op::kIn || e.op == Op::kNotIn) {
    // Empty sets (hand-built trees only): like is_in, a null stays unknown, so
    // x IN () selects nothing and x NOT IN () selects the non-null rows.
    if (e.literals.empty()) {
      if (e.op == Op::kIn) return BoundExpr::False();
      e.op = Op::kNotNull;
      return e;
    }
    if (e.literals.size() == 1) e.op = e.op == Op::kIn ? Op::kEq : Op::kNe;
  }
  if (negate && range && floating) {
    // NOT (x < 5) is true for NaN, which no range comparison selects.
    BoundExpr nan = BoundExpr::Predicate(Op::kIsNan, e.field_id, e.type, {}, e.column_path);
    return BoundExpr::Or({std::move(e), std::move(nan)});
  }
  return e;
}

BoundExpr Rewrite(BoundExpr e, bool negate) {
  switch (e.op) {
    case Op::kTrue:
    case Op::kFalse:
      return (e.op == Op::kTrue) != negate ? BoundExpr::True() : BoundExpr::False();
    case Op::kNot:
      if (e.children.size() != 1) return e;  // malformed; left for the validation to report
      return Rewrite(std::move(e.children[0]), !negate);
    case Op::kAnd:
    case Op::kOr: {
      std::vector<BoundExpr> children;
      for (auto& c : e.children) children.push_back(Rewrite(std::move(c), negate));
      return Fold(negate ? Negate(e.op) : e.op, std::move(children));
    }
    default:
      return RewritePredicate(std::move(e), negate);
  }
}

void CollectFieldIds(const BoundExpr& e, std::vector<int32_t>* ids) {
  if (e.is_predicate()) ids->push_back(e.field_id);
  for (const auto& c : e.children) CollectFieldIds(c, ids);
}

}  // namespace

arrow::Result<BoundExpr> Bind(const ExprPtr& expr, const Schema& schema) {
  if (expr == nullptr) return arrow::Status::Invalid("cannot bind a null filter");
  ARROW_ASSIGN_OR_RAISE(BoundExpr bound, BindNode(*expr, schema));
  return Normalize(std::move(bound));
}

BoundExpr Normalize(BoundExpr expr) { return Rewrite(std::move(expr), /*negate=*/false); }

std::vector<int32_t> ReferencedFieldIds(const BoundExpr& expr) {
  std::vector<int32_t> ids;
  CollectFieldIds(expr, &ids);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace icefloe::iceberg
