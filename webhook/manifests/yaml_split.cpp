// Splitting a YAML stream into documents with their exact bytes (DocumentReader, see yaml_doc.h):
// by its "---" and "..." lines, read in chunks, so memory follows the largest document.
#include <cstring>
#include <istream>

#include "manifests/yaml_doc.h"

namespace shmguard::manifests {
namespace {

bool is_separator(std::string_view line) {
  if (!line.starts_with(std::string_view("---"))) return false;
  return line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r';
}

bool is_document_end(std::string_view line) {
  if (!line.starts_with(std::string_view("..."))) return false;
  return line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r';
}

}  // namespace

bool DocumentReader::read_line(std::string_view& line, bool& newline) {
  constexpr std::size_t kChunk = 64 * 1024;
  std::size_t from = pos_;  // where '\n' has not been looked for yet
  for (;;) {
    if (std::size_t nl = buf_.find('\n', from); nl != std::string::npos) {
      line = std::string_view(buf_).substr(pos_, nl - pos_);
      pos_ = nl + 1;
      newline = true;
      return true;
    }
    if (eof_) {
      if (pos_ == buf_.size()) return false;
      line = std::string_view(buf_).substr(pos_);
      pos_ = buf_.size();
      newline = false;
      return true;
    }
    if (sink_) sink_->append(buf_, sink_from_, pos_ - sink_from_);
    sink_from_ = 0;
    buf_.erase(0, pos_);
    pos_ = 0;
    from = buf_.size();
    buf_.resize(from + kChunk);
    in_.read(buf_.data() + from, static_cast<std::streamsize>(kChunk));
    const auto got = static_cast<std::size_t>(in_.gcount());
    buf_.resize(from + got);
    if (got < kChunk) eof_ = true;  // read() stops short only at the end of the input (or an error)
  }
}

void DocumentReader::skip_plain_lines() {
  const char* data = buf_.data();
  const std::size_t size = buf_.size();
  std::size_t p = pos_;
  while (p < size && data[p] != '-' && data[p] != '.') {
    const void* nl = std::memchr(data + p, '\n', size - p);
    if (!nl) break;  // not whole in buf_ yet: read_line reads on
    p = static_cast<std::size_t>(static_cast<const char*>(nl) - data) + 1;
    ++line_;
  }
  pos_ = p;
}

bool DocumentReader::next(RawDocument& out) {
  if (done_) return false;
  out.text.clear();
  out.first_line = line_ + 1;
  bool any = false;
  if (has_pending_) {
    out.text = std::move(pending_);
    out.first_line = line_;
    has_pending_ = false;
    any = true;
  }
  sink_ = &out.text;
  sink_from_ = pos_;
  // The document's lines so far, whole, as one run (read_line may have copied earlier ones).
  auto keep_until = [this](std::size_t to) {
    sink_->append(buf_, sink_from_, to - sink_from_);
    sink_ = nullptr;
  };
  std::string_view line;
  bool had_newline = false;
  // Directives ("%YAML 1.1", "%TAG ...") belong to the document their "---" opens.
  bool directives = false;
  bool blank = out.text.empty();  // nothing but blank lines so far
  for (;;) {
    if (any && !blank && !directives) skip_plain_lines();
    if (!read_line(line, had_newline)) break;
    ++line_;
    const bool separator = is_separator(line);
    if (separator && any && !directives) {
      keep_until(pos_ - line.size() - (had_newline ? 1 : 0));  // up to this line, which starts the next
      pending_ = line;
      if (had_newline) pending_ += '\n';
      has_pending_ = true;
      return true;
    }
    if (separator && !any) out.first_line = line_;
    if (line.starts_with('%') && blank) directives = true;
    if (separator) directives = false;
    if (blank && line.find_first_not_of(" \t\r") != std::string_view::npos) blank = false;
    any = true;
    // "..." ends a document; what follows (directives, say) starts the next.
    if (!directives && is_document_end(line)) {
      keep_until(pos_);
      return true;
    }
  }
  keep_until(pos_);
  done_ = true;
  return any;
}

}  // namespace shmguard::manifests
