// The read-back of a surgical edit from the lines it inserted alone. An edit that only appended
// lines after the last line of block collections reads as the old tree plus the plan when each
// run of inserted lines, parsed by itself, is exactly the entries planned, and the lines around it
// close the collections as the old text did. Everything else (and every doubt) is left to the
// whole-document read-back (parse_document + matches_plan), which stays the reference.
//
// Why the rest of the document need not be read again. In block YAML a line's tokens depend on
// its own bytes and on the columns of the collections open at its start; a collection at column c
// ends at the first content line (not blank, not a comment) less indented than c (for a sequence
// whose "-" sit at its key's column, also at a key of that column). Inserted lines start at the
// column of the collection's entries, after its last line and before that first content line L:
//   - the old last entry ends at the first inserted line as it ended at L, unless it is a block
//     scalar ("|", ">"), whose trailing blank lines would move behind the inserted ones;
//   - the inserted lines, at or right of column c, parse inside the collection as they parse
//     alone (shifted right by c), unless they end in a block scalar;
//   - L closes the collection and the same ancestors as before.
// Nested collections that end on one line get their lines innermost first, columns strictly
// decreasing, so each run also closes the runs inside it. Anchors, aliases, directives, flow
// collections and a text without a final line break take the whole read-back.
#pragma once

#include <string>

#include "manifests/surgical.h"
#include "manifests/yaml_doc.h"

namespace shmguard::manifests {

// True when `edited` (edit_in_place of `old_text`, which parsed into `doc`) is shown to read as
// the old tree plus its planned entries by the argument above; `scratch` holds each run's parse.
// False says nothing about the edit: read the whole text back.
bool reads_back_from_insertions(const std::string& old_text, const YamlDocument& doc, const EditedText& edited,
                                YamlDocument& scratch);

}  // namespace shmguard::manifests
