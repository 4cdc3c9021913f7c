// The man pages (man/*.1) against the real command tree from build_app(): every command has
// its page verlctl-<command>(1), every subcommand and every option is documented on its
// command's page, and verlctl(1) lists every command, every global option and the exit-code
// table exactly. Adding a command or an option without documenting it fails here.
//
// "Documented" means an entry of the page, not a mention: a subcommand is the tag of a .TP/.IP
// entry in the page's COMMANDS section, an option's names (--long, -s, a positional's name)
// appear in the tag of an entry in a section whose title has OPTIONS. The pages are read as a
// reader sees them: roff escapes (\-, \fB, \(aq, ...) are resolved before matching.
// Rendering warnings are tests/integration/man_test.sh's job.
#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/app.h"
#include "common/error.h"

namespace verl::cli {
namespace {

// ---- a man page as text ------------------------------------------------------------------

// A .TP/.TQ/.IP entry: its tag line and the paragraph under it, both plain text.
struct Entry {
  std::string tag;
  std::string body;
};

struct Section {
  std::string title;  // as written after .SH, e.g. "EXIT STATUS"
  std::string text;   // every line of text in it (its .SS titles too), one per line
  std::vector<Entry> entries;
};

struct Page {
  std::string path;
  bool found = false;
  std::vector<Section> sections;

  const Section* section(const std::string& title) const {
    for (const auto& s : sections)
      if (s.title == title) return &s;
    return nullptr;
  }
};

std::string collapse(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string glyph(const std::string& name) {
  static const std::map<std::string, std::string> kGlyphs = {
      {"aq", "'"}, {"dq", "\""}, {"lq", "\""}, {"rq", "\""}, {"oq", "'"}, {"cq", "'"},
      {"em", "-"}, {"en", "-"}, {"hy", "-"},  {"mi", "-"}, {"mu", "x"}, {"bu", "*"},
      {"ti", "~"}, {"ha", "^"}, {"rs", "\\"}, {"lB", "["}, {"rB", "]"}, {"ga", "`"},
  };
  auto it = kGlyphs.find(name);
  return it == kGlyphs.end() ? "" : it->second;
}

// Resolves the roff escapes of one line into the text a reader sees; "\-" is "-".
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char e = s[++i];
    switch (e) {
      case '"':  // a comment runs to the end of the line
        return out;
      case '-': out += '-'; break;
      case 'e': out += '\\'; break;
      case ' ': case '~': case '0': out += ' '; break;
      case '&': case '%': case ':': case 'c': case '|': case '^': case ',': case '/': case ')': break;
      case 'f':  // font change: \fB, \f(CW, \f[CR]
      case '*':  // string: \*R, \*(Tm, \*[name]
        if (i + 1 < s.size() && s[i + 1] == '(') {
          i += 3;
        } else if (i + 1 < s.size() && s[i + 1] == '[') {
          const size_t close = s.find(']', i);
          i = close == std::string::npos ? s.size() : close;
        } else {
          i += 1;
        }
        break;
      case '(':
        out += glyph(s.substr(i + 1, 2));
        i += 2;
        break;
      case '[': {
        const size_t close = s.find(']', i);
        out += glyph(s.substr(i + 1, close == std::string::npos ? std::string::npos : close - i - 1));
        i = close == std::string::npos ? s.size() : close;
        break;
      }
      default: out += e;
    }
  }
  return out;
}

// The arguments of a macro line: blank-separated, "double quoted" when they hold blanks ("" is a
// literal quote inside quotes); escapes are kept for unescape().
std::vector<std::string> macro_args(const std::string& s) {
  std::vector<std::string> args;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && s[i] == ' ') ++i;
    if (i == s.size()) break;
    std::string arg;
    if (s[i] == '"') {
      for (++i; i < s.size(); ++i) {
        if (s[i] == '"' && i + 1 < s.size() && s[i + 1] == '"') {
          arg += '"';
          ++i;
        } else if (s[i] == '"') {
          ++i;
          break;
        } else {
          arg += s[i];
        }
      }
    } else {
      for (; i < s.size() && s[i] != ' '; ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) {
          if (s[i + 1] == '"') return args;  // comment
          arg += s[i++];
        }
        arg += s[i];
      }
    }
    args.push_back(arg);
  }
  return args;
}

Page parse_page(const std::string& path, const std::string& roff) {
  Page page;
  page.path = path;
  page.found = true;
  page.sections.push_back({"", "", {}});  // whatever comes before the first .SH
  bool tag_pending = false;  // the next line of text is the tag of a .TP/.TQ
  bool in_entry = false;     // text goes to the body of the last entry
  auto add_text = [&](const std::string& raw) {
    const std::string text = collapse(raw);
    Section& sec = page.sections.back();
    if (tag_pending) {
      sec.entries.push_back({text, ""});
      tag_pending = false;
      in_entry = true;
    } else if (in_entry && !text.empty()) {
      auto& body = sec.entries.back().body;
      body += (body.empty() ? "" : " ") + text;
    }
    sec.text += text + "\n";
  };
  std::istringstream in(roff);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || (line[0] != '.' && line[0] != '\'')) {
      add_text(unescape(line));
      continue;
    }
    size_t i = 1;
    while (i < line.size() && line[i] == ' ') ++i;
    size_t end = i;
    while (end < line.size() && line[end] != ' ') ++end;
    const std::string name = line.substr(i, end - i);
    if (name.rfind("\\\"", 0) == 0) continue;  // .\" comment
    std::vector<std::string> args = macro_args(line.substr(end));
    for (auto& a : args) a = unescape(a);
    auto joined = [&](const char* sep) {
      std::string out;
      for (size_t k = 0; k < args.size(); ++k) out += (k ? sep : "") + args[k];
      return out;
    };
    if (name == "SH") {
      page.sections.push_back({collapse(joined(" ")), "", {}});
      tag_pending = in_entry = false;
    } else if (name == "SS") {
      tag_pending = in_entry = false;
      add_text(joined(" "));
    } else if (name == "TP" || name == "TQ") {
      tag_pending = true;
      in_entry = false;
    } else if (name == "IP") {
      tag_pending = in_entry = false;
      if (!args.empty() && !collapse(args[0]).empty()) {
        tag_pending = true;
        add_text(args[0]);
      }
    } else if (name == "PP" || name == "LP" || name == "P") {
      tag_pending = in_entry = false;
    } else if (name == "B" || name == "I" || name == "SM" || name == "SB") {
      if (!args.empty()) add_text(joined(" "));
    } else if (name == "BR" || name == "RB" || name == "BI" || name == "IB" || name == "IR" || name == "RI") {
      add_text(joined(""));  // alternating fonts: the arguments run together
    }
    // Every other request (.TH .RS .RE .EX .EE .nf .fi .br .sp ...) prints no text of its own.
  }
  return page;
}

const std::string kManDir = std::string(VERL_SOURCE_DIR) + "/man";

const Page& page(const std::string& file) {
  static std::map<std::string, Page> cache;
  auto it = cache.find(file);
  if (it != cache.end()) return it->second;
  const std::string path = kManDir + "/" + file;
  std::ifstream in(path);
  Page p;
  p.path = path;
  if (in) {
    std::stringstream text;
    text << in.rdbuf();
    p = parse_page(path, text.str());
  }
  return cache.emplace(file, std::move(p)).first->second;
}

std::string page_of(const std::string& command) { return "verlctl-" + command + ".1"; }

// word occurs in text, not as a part of a longer name: "--file" is not in "--file-name",
// "-f" is not in "--file".
bool has_word(const std::string& text, const std::string& word) {
  static const std::string kNameChar = "A-Za-z0-9_-";
  static const std::regex kSpecial(R"([.^$|()\[\]{}*+?\\])");
  const std::string literal = std::regex_replace(word, kSpecial, R"(\$&)");
  const std::regex re("(^|[^" + kNameChar + "])" + literal + "($|[^" + kNameChar + "])");
  return std::regex_search(text, re);
}

// The tag of an entry in a section whose title contains title_part names word.
bool in_tags(const Page& p, const std::string& title_part, const std::string& word) {
  for (const auto& s : p.sections) {
    if (s.title.find(title_part) == std::string::npos) continue;
    for (const auto& e : s.entries)
      if (has_word(e.tag, word)) return true;
  }
  return false;
}

// The tag of an entry in the page's COMMANDS section starts with these words ("show",
// "node add"): how a command page lists its subcommands.
bool lists_command(const Page& p, const std::string& words) {
  const Section* s = p.section("COMMANDS");
  if (!s) return false;
  for (const auto& e : s->entries) {
    if (e.tag.rfind(words, 0) != 0) continue;
    if (e.tag.size() == words.size() || std::string(" [|<").find(e.tag[words.size()]) != std::string::npos)
      return true;  // "show", "help [TOPIC]", "config show|validate|lint"
  }
  return false;
}

// ---- the command tree ----------------------------------------------------------------------

struct Command {
  std::vector<std::string> path;  // {"config", "lint"}; empty for verlctl itself
  CLI::App* app = nullptr;
  std::vector<CLI::Option*> options;  // its own and its option groups', help flags left out

  std::string name() const {
    std::string out = "verlctl";
    for (const auto& p : path) out += " " + p;
    return out;
  }
};

// Hidden (group "") commands and options are internal plumbing, deliberately undocumented.
bool hidden(const CLI::App* app) { return app->get_group().empty(); }
bool hidden(const CLI::Option* opt) { return opt->get_group().empty(); }

void collect_options(CLI::App* app, std::vector<CLI::Option*>& out, bool keep_help) {
  for (CLI::Option* opt : app->get_options()) {
    const bool help = opt == app->get_help_ptr() || opt == app->get_help_all_ptr();
    if ((help && !keep_help) || hidden(opt)) continue;
    out.push_back(opt);
  }
  // CLI11 implements option groups as nameless subcommands.
  for (CLI::App* group : app->get_subcommands([](CLI::App* sub) { return sub->get_name().empty(); }))
    collect_options(group, out, keep_help);
}

void walk(CLI::App* app, std::vector<std::string> path, std::vector<Command>& out) {
  Command c;
  c.path = path;
  c.app = app;
  // verlctl's own --help and --help-all are global options; on a command they are the same flags.
  collect_options(app, c.options, /*keep_help=*/path.empty());
  out.push_back(c);
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
    if (sub->get_name().empty() || hidden(sub)) continue;
    auto sub_path = path;
    sub_path.push_back(sub->get_name());
    walk(sub, sub_path, out);
  }
}

std::vector<Command> commands(CLI::App& root) {
  std::vector<Command> out;
  walk(&root, {}, out);
  return out;
}

// Every name a user types for an option: --long, -s, or a positional's name.
std::vector<std::string> option_names(const CLI::Option* opt) {
  std::vector<std::string> names;
  for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
  for (const auto& s : opt->get_snames()) names.push_back("-" + s);
  if (names.empty()) names.push_back(opt->get_single_name());  // positional
  return names;
}

// ---- the checks, as functions so that the tests of the test can feed them a changed tree ----

enum class Depth { kTopLevel, kNested };

std::vector<std::string> undocumented_commands(CLI::App& root, Depth depth) {
  std::vector<std::string> problems;
  for (const auto& c : commands(root)) {
    if (c.path.empty() || (c.path.size() == 1) != (depth == Depth::kTopLevel)) continue;
    const std::string file = page_of(c.path[0]);
    const Page& p = page(file);
    if (!p.found) {
      if (c.path.size() == 1) problems.push_back(c.name() + ": no man page man/" + file);
      continue;
    }
    if (c.path.size() == 1) {
      const Section* name = p.section("NAME");
      if (!name || collapse(name->text).rfind("verlctl-" + c.path[0] + " - ", 0) != 0)
        problems.push_back(c.name() + ": man/" + file + " has no NAME line \"verlctl-" + c.path[0] + " - ...\"");
      if (!lists_command(page("verlctl.1"), c.path[0]))
        problems.push_back(c.name() + ": not an entry of COMMANDS in man/verlctl.1");
      continue;
    }
    std::string words;
    for (size_t i = 1; i < c.path.size(); ++i) words += (i > 1 ? " " : "") + c.path[i];
    if (!lists_command(p, words))
      problems.push_back(c.name() + ": not an entry of COMMANDS in man/" + file);
  }
  return problems;
}

std::vector<std::string> undocumented_options(CLI::App& root) {
  std::vector<std::string> problems;
  for (const auto& c : commands(root)) {
    const std::string file = c.path.empty() ? "verlctl.1" : page_of(c.path[0]);
    const Page& p = page(file);
    if (!p.found) continue;  // undocumented_commands() reports the missing page
    for (const CLI::Option* opt : c.options)
      for (const auto& name : option_names(opt))
        if (!in_tags(p, "OPTIONS", name))
          problems.push_back(c.name() + " " + name + ": not an entry of OPTIONS in man/" + file);
  }
  return problems;
}

std::string lines(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += "  " + s + "\n";
  return out;
}

class ManPages : public ::testing::Test {
 protected:
  ManPages() : app_(build_app(ctx_)) {}
  Context ctx_;
  std::unique_ptr<CLI::App> app_;
};

// ---- the pages against the tree ------------------------------------------------------------

TEST_F(ManPages, MainPageExists) {
  EXPECT_TRUE(page("verlctl.1").found) << kManDir << "/verlctl.1 cannot be read";
}

TEST_F(ManPages, EveryCommandHasItsPageAndAnEntryInTheMainPage) {
  const auto problems = undocumented_commands(*app_, Depth::kTopLevel);
  EXPECT_TRUE(problems.empty()) << "commands without documentation:\n" << lines(problems);
}

TEST_F(ManPages, EverySubcommandIsAnEntryOfItsCommandsPage) {
  const auto problems = undocumented_commands(*app_, Depth::kNested);
  EXPECT_TRUE(problems.empty()) << "subcommands without documentation:\n" << lines(problems);
}

TEST_F(ManPages, EveryOptionIsDocumented) {
  const auto problems = undocumented_options(*app_);
  EXPECT_TRUE(problems.empty()) << "options without documentation:\n" << lines(problems);
}

TEST_F(ManPages, EveryGlobalOptionIsInTheMainPage) {
  // A subset of EveryOptionIsDocumented, kept apart so that its failure says what it is.
  std::vector<std::string> missing;
  const auto tree = commands(*app_);
  for (const CLI::Option* opt : tree.front().options)
    for (const auto& name : option_names(opt))
      if (!in_tags(page("verlctl.1"), "OPTIONS", name)) missing.push_back(name);
  EXPECT_TRUE(missing.empty()) << "global options missing from OPTIONS in man/verlctl.1:\n" << lines(missing);
  // The flags CLI11 adds itself are global options too.
  for (const char* name : {"--help", "-h", "--help-all", "--version", "-V"})
    EXPECT_TRUE(in_tags(page("verlctl.1"), "OPTIONS", name)) << name;
}

TEST_F(ManPages, ExitStatusIsTheExitCodeTable) {
  const Section* s = page("verlctl.1").section("EXIT STATUS");
  ASSERT_NE(s, nullptr) << "man/verlctl.1 has no EXIT STATUS section";
  const auto& table = exit_code_table();
  for (const auto& e : table) {
    const std::string tag = std::to_string(static_cast<int>(e.code)) + " " + std::string(e.name);
    bool found = false;
    for (const auto& entry : s->entries) {
      if (entry.tag != tag) continue;
      found = true;
      EXPECT_EQ(entry.body, std::string(e.meaning)) << "meaning of exit code " << tag;
    }
    EXPECT_TRUE(found) << "EXIT STATUS of man/verlctl.1 has no entry \"" << tag << "\"";
  }
  // No code that the table does not have (a removed or renumbered one).
  EXPECT_EQ(s->entries.size(), table.size()) << "EXIT STATUS has " << s->entries.size() << " entries, the table "
                                             << table.size();
}

TEST_F(ManPages, MainPageSeesAlsoEveryCommandPage) {
  const Section* s = page("verlctl.1").section("SEE ALSO");
  ASSERT_NE(s, nullptr) << "man/verlctl.1 has no SEE ALSO section";
  for (CLI::App* sub : app_->get_subcommands([](CLI::App* a) { return !a->get_name().empty() && !hidden(a); }))
    EXPECT_NE(s->text.find("verlctl-" + sub->get_name() + "(1)"), std::string::npos) << sub->get_name();
}

TEST_F(ManPages, EveryCommandPageIsForACommandThatExists) {
  const std::regex kCommandPage(R"(verlctl-([a-z0-9-]+)\.1)");
  ASSERT_TRUE(std::filesystem::is_directory(kManDir)) << kManDir;
  for (const auto& entry : std::filesystem::directory_iterator(kManDir)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (!std::regex_match(file, m, kCommandPage)) continue;
    const auto subs = app_->get_subcommands([&](CLI::App* a) { return a->get_name() == m[1].str(); });
    EXPECT_FALSE(subs.empty()) << "man/" << file << " documents a command verlctl does not have";
  }
}

// ---- the test of the test: the checks fail when something is left out ---------------------

TEST_F(ManPages, UndocumentedOptionIsCaught) {
  CLI::App* lint = app_->get_subcommand("config")->get_subcommand("lint");
  std::string value;
  lint->add_option("--gpu-memory", value, "an option no page documents");  // a prefix of a documented one
  lint->add_option("-Z", value, "a short name no page documents");
  lint->add_option("undocumented_positional", value, "a positional no page documents");
  app_->add_flag("--undocumented-global", "a global flag no page documents");
  const std::string got = lines(undocumented_options(*app_));
  for (const char* want : {"verlctl config lint --gpu-memory:", "verlctl config lint -Z:",
                           "verlctl config lint undocumented_positional:", "verlctl --undocumented-global:"})
    EXPECT_NE(got.find(want), std::string::npos) << "not reported: " << want << "\nreported:\n" << got;
}

TEST_F(ManPages, UndocumentedCommandIsCaught) {
  app_->add_subcommand("frobnicate", "a command with no page");
  app_->get_subcommand("config")->add_subcommand("diff", "a subcommand its page does not list");
  app_->get_subcommand("config")->add_subcommand("sho", "a prefix of a listed subcommand");
  const std::string got =
      lines(undocumented_commands(*app_, Depth::kTopLevel)) + lines(undocumented_commands(*app_, Depth::kNested));
  for (const char* want : {"verlctl frobnicate: no man page man/verlctl-frobnicate.1",
                           "verlctl config diff: not an entry of COMMANDS", "verlctl config sho: not an entry"})
    EXPECT_NE(got.find(want), std::string::npos) << "not reported: " << want << "\nreported:\n" << got;
}

TEST(ManPageText, ReadsRoffAsTheReaderSeesIt) {
  const Page p = parse_page("test.1",
                            ".TH T 1\n"
                            ".SH \"EXIT STATUS\"\n"
                            ".\\\" a comment\n"
                            "intro \\fBtext\\fR\n"
                            ".TP 20\n"
                            ".BR 5 \" check\\-failed\"\n"
                            "a probe, lint \\-\\-strict or\n"
                            "smoke check failed\n"
                            ".SH OPTIONS\n"
                            ".TP\n"
                            "\\fB\\-f\\fR, \\fB\\-\\-file\\fR=\\fIFILE\\fR\n"
                            "The file\\(aqs name.\n"
                            ".IP \\(bu 2\n"
                            "item\n");
  const Section* exit = p.section("EXIT STATUS");
  ASSERT_NE(exit, nullptr);
  ASSERT_EQ(exit->entries.size(), 1u);
  EXPECT_EQ(exit->entries[0].tag, "5 check-failed");
  EXPECT_EQ(exit->entries[0].body, "a probe, lint --strict or smoke check failed");
  EXPECT_NE(exit->text.find("intro text"), std::string::npos);
  const Section* opts = p.section("OPTIONS");
  ASSERT_NE(opts, nullptr);
  ASSERT_EQ(opts->entries.size(), 2u);
  EXPECT_EQ(opts->entries[0].tag, "-f, --file=FILE");
  EXPECT_EQ(opts->entries[0].body, "The file's name.");
  EXPECT_EQ(opts->entries[1].tag, "*");
  EXPECT_TRUE(in_tags(p, "OPTIONS", "--file"));
  EXPECT_TRUE(in_tags(p, "OPTIONS", "-f"));
  EXPECT_FALSE(in_tags(p, "OPTIONS", "--fil"));
  EXPECT_FALSE(in_tags(p, "OPTIONS", "-i"));  // not a part of "--file"
}

}  // namespace
}  // namespace verl::cli
