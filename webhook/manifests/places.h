// Where a template's warnings point: the line of the annotation a warning is about, or for a
// warning about a command-line flag (Warning::about "--num-workers") the line of the first
// command/args item (or script source line) of the template that holds that flag. Worked out from
// the document's tree while it lives, so a report judged later (a TrainJob whose runtime comes
// after it) is placed the same way.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "inject/recognize.h"
#include "manifests/templates.h"
#include "manifests/yaml_doc.h"

namespace shmguard::manifests {

struct Places {
  int fallback = 0;  // the template's line
  std::vector<std::pair<std::string, int>> annotations;  // each annotation key and its line
  struct Item {
    std::string text;  // the item as written in the document (quotes, block scalar lines)
    int line = 0;      // the line the text starts on
  };
  std::vector<Item> items;  // command and args items, script sources, in document order
  bool has_items = false;   // items were gathered

  // The line for a warning about `about`: its flag's, its annotation's, else the template's.
  int line_for(std::string_view about) const;
};

// The places of the template `ref` (its node alive in `root`) in the document `raw`; `line` is
// the template's own line. Command items are gathered only `with_items` (a walk over the text).
Places places_of(const YamlNode* root, const TemplateRef& ref, const RawDocument& raw, int line, bool with_items);

// True when a warning in `warnings` is about a flag: only then are command items needed.
bool any_flag_warning(const std::vector<inject::Warning>& warnings);

// The line of `flag` as a word of `item` (not part of a longer flag: "--workers" is not in
// "--workers-x" nor "--num-workers"), or 0.
int flag_line(const Places::Item& item, std::string_view flag);

}  // namespace shmguard::manifests
