// The floor under `shmguard mutate`'s single-thread time (hack/bench.sh offline): libyaml alone
// reading a whole stream into events and freeing them, nothing built from them. Every byte of
// mutate's input goes through this parse once, so no work on shmguard's side can make mutate
// faster than this program; PyYAML's time over it says how far any ratio to PyYAML can go.
// usage: shmguard_libyaml_floor FILE   (prints the event count; exit 1 on a YAML error)
#include <yaml.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FILE\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "%s: cannot open\n", argv[1]);
    return 2;
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  yaml_parser_t parser;
  if (!yaml_parser_initialize(&parser)) return 2;
  std::unique_ptr<yaml_parser_t, void (*)(yaml_parser_t*)> guard(&parser, yaml_parser_delete);
  yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  unsigned long events = 0;
  for (bool end = false; !end; ++events) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&parser, &ev)) {
      std::fprintf(stderr, "%s:%zu: %s\n", argv[1], parser.problem_mark.line + 1, parser.problem ? parser.problem : "invalid YAML");
      return 1;
    }
    end = ev.type == YAML_STREAM_END_EVENT;
    yaml_event_delete(&ev);
  }
  std::printf("%lu events\n", events);
  return 0;
}
