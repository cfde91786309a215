// Warning lines (see places.h).
#include "manifests/places.h"

#include <algorithm>
#include <cctype>

namespace shmguard::manifests {
namespace {

constexpr std::size_t kMaxDepth = 16;

bool flag_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

const YamlNode* member(const YamlNode* node, std::string_view key) {
  if (!node || node->kind != YamlNode::Kind::kMap) return nullptr;
  const YamlNode* found = nullptr;
  for (const auto& [k, v] : node->pairs)
    if (k->value == key) found = v;
  return found;
}

// Fields whose commands are not the container's own (probes, hooks) or hold no command.
bool skipped(std::string_view key) {
  return key == "metadata" || key == "env" || key == "livenessProbe" || key == "readinessProbe" ||
         key == "startupProbe" || key == "lifecycle" || key == "volumes" || key == "resources";
}

struct Gatherer {
  const RawDocument& raw;
  TextIndex index;
  std::vector<Places::Item>& out;

  void item(const YamlNode* n) {
    if (n->kind != YamlNode::Kind::kScalar) return;
    const std::size_t from = index.byte(n->start), to = index.byte(n->end);
    if (from >= to || to > raw.text.size()) return;
    out.push_back({raw.text.substr(from, to - from), raw.first_line + n->line - 1});
  }
  void walk(const YamlNode* n, std::size_t depth) {
    if (!n || depth > kMaxDepth) return;
    if (n->kind == YamlNode::Kind::kSequence) {
      for (const YamlNode* i : n->items) walk(i, depth + 1);
      return;
    }
    if (n->kind != YamlNode::Kind::kMap) return;
    for (const auto& [k, v] : n->pairs) {
      if (skipped(k->value)) continue;
      if ((k->value == "command" || k->value == "args") && v->kind == YamlNode::Kind::kSequence) {
        for (const YamlNode* i : v->items) item(i);
      } else if (k->value == "source" && v->kind == YamlNode::Kind::kScalar) {
        item(v);
      } else {
        walk(v, depth + 1);
      }
    }
  }
};

}  // namespace

int flag_line(const Places::Item& item, std::string_view flag) {
  if (flag.empty()) return 0;
  const std::string& t = item.text;
  for (std::size_t at = t.find(flag); at != std::string::npos; at = t.find(flag, at + 1)) {
    const std::size_t end = at + flag.size();
    if ((at > 0 && flag_char(t[at - 1])) || (end < t.size() && flag_char(t[end]))) continue;
    return item.line + static_cast<int>(std::count(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  }
  return 0;
}

int Places::line_for(std::string_view about) const {
  if (about.starts_with('-')) {
    for (const auto& i : items)
      if (int l = flag_line(i, about)) return l;
    return fallback;
  }
  for (const auto& [key, line] : annotations)
    if (!about.empty() && key == about) return line;
  return fallback;
}

bool any_flag_warning(const std::vector<inject::Warning>& warnings) {
  return std::any_of(warnings.begin(), warnings.end(), [](const inject::Warning& w) { return w.about.starts_with('-'); });
}

Places places_of(const YamlNode* root, const TemplateRef& ref, const RawDocument& raw, int line, bool with_items) {
  Places p;
  p.fallback = line;
  const bool trainjob = ref.template_kind == TemplateKind::kTrainJob;
  const YamlNode* ann = resolve(root, ref.pointer + (trainjob ? "/spec/annotations" : "/metadata/annotations"));
  if (ann && ann->kind == YamlNode::Kind::kMap)
    for (const auto& [k, v] : ann->pairs)
      if (k->kind == YamlNode::Kind::kScalar) p.annotations.emplace_back(k->value, raw.first_line + k->line - 1);
  if (!with_items) return p;
  p.has_items = true;
  const YamlNode* from = ref.node;
  if (trainjob) from = member(member(ref.node, "spec"), "trainer");
  Gatherer{raw, TextIndex(raw.text), p.items}.walk(from, 0);
  return p;
}

}  // namespace shmguard::manifests
