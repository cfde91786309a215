// The edit plan (see edit_plan.h): planned once per tree, written into the text by the splicer and
// into the tree here, and checked against the edited text's tree here.
#include "manifests/edit_plan.h"

#include <map>

#include "manifests/yaml_internal.h"

namespace shmguard::manifests {
namespace {

using nlohmann::json;

struct Refused {
  std::string why;
  int line = 0;
  EditFailure kind = EditFailure::kUnsupportedLayout;
};

[[noreturn]] void unsupported(std::string why) { throw Refused{std::move(why)}; }

[[noreturn]] void conflict(const YamlNode* anchor, const std::string& what) {
  throw Refused{"templates sharing the anchor here need different edits under it (" + what + ")", anchor->line,
                EditFailure::kAnchorConflict};
}

class Planner {
 public:
  explicit Planner(const YamlDocument& doc) : doc_(doc) {}

  void add(const std::string& prefix, const json& ops) {
    for (const auto& op : ops) {
      const std::string kind = op.at("op").get<std::string>();
      PlannedEdit e;
      e.path = prefix + op.at("path").get<std::string>();
      const auto slash = e.path.rfind('/');
      if (slash == std::string::npos) unsupported("cannot patch the document root");
      if (kind != "add" && kind != "replace") unsupported("unsupported operation " + kind + " " + e.path);
      e.parent = resolve(doc_.root, e.path.substr(0, slash), &e.anchor);
      if (!e.parent) unsupported("path " + e.path + " does not resolve");
      const std::string last = pointer_tokens(e.path.substr(slash)).back();
      e.value = op.at("value");
      if (e.parent->kind == YamlNode::Kind::kSequence) {
        if (kind == "add" && last == "-") {
          e.op = EditOp::kAppend;
        } else if (auto idx = item_index(last, e.parent->items.size()); kind == "replace" && idx) {
          e.op = EditOp::kReplace;
          e.old = e.parent->items[*idx];
        } else {
          unsupported("unsupported operation " + kind + " " + e.path);
        }
      } else if (e.parent->kind == YamlNode::Kind::kMap) {
        e.key = last;
        for (const auto& [k, v] : e.parent->pairs)  // the last of a key written twice, as kubectl reads it
          if (k->kind == YamlNode::Kind::kScalar && k->value == last) e.key_node = k, e.old = v;
        if (!e.old && kind == "replace") unsupported("path " + e.path + " does not resolve");
        e.op = e.old ? EditOp::kReplace : EditOp::kAppend;
      } else {
        unsupported("cannot add to a scalar at " + e.path);
      }
      push(std::move(e));
    }
  }

  EditPlan take() { return std::move(plan_); }

 private:
  // Paths that reach one node through an anchor (from two templates, or two places in one) each
  // ask for their edit: one asked for before by another path is marked shared (the text gets it
  // once); a different one under the anchor conflicts, as no text can hold both.
  void push(PlannedEdit e) {
    if (e.anchor) {
      bool other_entry = false;  // another path appends something else to this sequence
      for (const auto& prior : plan_.edits) {
        if (prior.parent != e.parent || prior.op != e.op || prior.path == e.path) continue;
        if (e.op == EditOp::kReplace) {
          if (prior.old != e.old) continue;
          if (prior.value != e.value) conflict(e.anchor, "different values for one field");
          e.shared = true;
          break;
        }
        if (prior.key != e.key) continue;
        if (prior.value == e.value) {
          e.shared = true;
          break;
        }
        if (!e.key.empty()) conflict(e.anchor, "different values for " + e.key);
        other_entry = true;
      }
      if (!e.shared && other_entry) conflict(e.anchor, "different entries added to one list");
    }
    plan_.edits.push_back(std::move(e));
  }

  const YamlDocument& doc_;
  EditPlan plan_;
};

// ---- the read-back ----

// The plan's paths as a tree of reference tokens: what each node of the document expects.
struct Expect {
  std::map<std::string, Expect, std::less<>> kids;
  std::vector<const PlannedEdit*> appends;  // in plan order
  const PlannedEdit* replace = nullptr;
};

Expect expectations(const EditPlan& plan) {
  Expect root;
  for (const auto& e : plan.edits) {
    auto tokens = pointer_tokens(e.path);
    if (e.op == EditOp::kAppend) tokens.pop_back();  // "-" or the new key: the parent expects it
    Expect* at = &root;
    for (const auto& t : tokens) at = &at->kids[t];
    if (e.op == EditOp::kAppend) at->appends.push_back(&e);
    else at->replace = &e;
  }
  return root;
}

class ReadBack {
 public:
  explicit ReadBack(std::size_t budget) : budget_(budget) {}

  bool matches(const YamlNode* before, const YamlNode* after, const Expect* want) {
    if (!before || !after || !spend()) return false;
    if (want && want->replace) return equals_json(after, want->replace->value, budget_);
    if (!want) return same(before, after);
    if (before->kind != after->kind) return false;
    if (before->kind == YamlNode::Kind::kMap) return map_matches(before, after, *want);
    if (before->kind == YamlNode::Kind::kSequence) return sequence_matches(before, after, *want);
    return want->appends.empty() && want->kids.empty() && same(before, after);
  }

 private:
  bool spend() { return budget_ > 0 && (--budget_, true); }

  static const Expect* kid(const Expect& want, std::string_view token) {
    auto it = want.kids.find(token);
    return it == want.kids.end() ? nullptr : &it->second;
  }

  bool map_matches(const YamlNode* before, const YamlNode* after, const Expect& want) {
    const std::size_t n = before->pairs.size();
    if (after->pairs.size() != n + want.appends.size()) return false;
    for (std::size_t i = 0; i < n; ++i) {
      const auto& [bk, bv] = before->pairs[i];
      const auto& [ak, av] = after->pairs[i];
      if (!same(bk, ak)) return false;
      const Expect* sub = bk->kind == YamlNode::Kind::kScalar ? kid(want, bk->value) : nullptr;
      if (!matches(bv, av, sub)) return false;
    }
    return appends_match(after, n, want.appends, budget_);
  }

  bool sequence_matches(const YamlNode* before, const YamlNode* after, const Expect& want) {
    const std::size_t n = before->items.size();
    if (after->items.size() != n + want.appends.size()) return false;
    for (std::size_t i = 0; i < n; ++i)
      if (!matches(before->items[i], after->items[i], want.kids.empty() ? nullptr : kid(want, std::to_string(i))))
        return false;
    return appends_match(after, n, want.appends, budget_);
  }

  // Nodes no edit touches: the same kind, values, tags and typing (a plain scalar stays plain).
  bool same(const YamlNode* a, const YamlNode* b) {
    if (!spend() || a->kind != b->kind) return false;
    switch (a->kind) {
      case YamlNode::Kind::kScalar:
        return a->value == b->value && a->tag == b->tag &&
               (a->style == ScalarStyle::kPlain) == (b->style == ScalarStyle::kPlain);
      case YamlNode::Kind::kSequence:
        if (a->items.size() != b->items.size()) return false;
        for (std::size_t i = 0; i < a->items.size(); ++i)
          if (!same(a->items[i], b->items[i])) return false;
        return true;
      case YamlNode::Kind::kMap:
        if (a->pairs.size() != b->pairs.size()) return false;
        for (std::size_t i = 0; i < a->pairs.size(); ++i)
          if (!same(a->pairs[i].first, b->pairs[i].first) || !same(a->pairs[i].second, b->pairs[i].second))
            return false;
        return true;
    }
    return false;
  }

  std::size_t budget_;
};

}  // namespace

Result<EditPlan> plan_edits(const YamlDocument& doc, const std::vector<TemplatePatch>& patches) {
  if (!doc.root) return Failure{"empty document", 0, static_cast<int>(EditFailure::kUnsupportedLayout)};
  try {
    Planner planner(doc);
    for (const auto& p : patches) planner.add(p.pointer, *p.ops);
    return planner.take();
  } catch (const Refused& r) {
    return Failure{r.why, r.line, static_cast<int>(r.kind)};
  } catch (const json::exception& e) {  // a patch of the wrong shape (op, path or value missing)
    return Failure{e.what(), 0, static_cast<int>(EditFailure::kUnsupportedLayout)};
  }
}

void apply_plan(YamlDocument& doc, const EditPlan& plan) {
  for (const auto& e : plan.edits) {
    if (e.shared) continue;
    // The plan was made from `doc`: its nodes are this document's own, reached read-only.
    auto* parent = const_cast<YamlNode*>(e.parent);
    YamlNode* value = internal::from_json(doc, e.value);
    if (e.op == EditOp::kAppend && parent->kind == YamlNode::Kind::kSequence) {
      parent->items.push_back(value);
    } else if (e.op == EditOp::kAppend) {
      YamlNode* key = doc.make(YamlNode::Kind::kScalar);
      key->style = ScalarStyle::kNew;
      key->value = e.key;
      parent->pairs.emplace_back(key, value);
    } else if (parent->kind == YamlNode::Kind::kSequence) {
      for (auto& item : parent->items)
        if (item == e.old) item = value;
    } else {
      for (auto& [k, v] : parent->pairs)
        if (v == e.old) v = value;
    }
  }
}

bool appends_match(const YamlNode* collection, std::size_t from, const std::vector<const PlannedEdit*>& appends,
                   std::size_t budget) {
  if (collection->kind == YamlNode::Kind::kMap) {
    if (collection->pairs.size() != from + appends.size()) return false;
    for (std::size_t j = 0; j < appends.size(); ++j) {
      const auto& [k, v] = collection->pairs[from + j];
      if (k->kind != YamlNode::Kind::kScalar || k->value != appends[j]->key) return false;
      if (!equals_json(v, appends[j]->value, budget)) return false;
    }
    return true;
  }
  if (collection->kind != YamlNode::Kind::kSequence || collection->items.size() != from + appends.size()) return false;
  for (std::size_t j = 0; j < appends.size(); ++j)
    if (!equals_json(collection->items[from + j], appends[j]->value, budget)) return false;
  return true;
}

bool matches_plan(const YamlNode* before, const YamlNode* after, const EditPlan& plan, std::size_t budget) {
  const Expect want = expectations(plan);
  return ReadBack(budget).matches(before, after, &want);
}

}  // namespace shmguard::manifests
