#include "common/template.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "tests/testing/temp_dir.h"

namespace verl::tmpl {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

Template t(const std::string& text) { return {"x.sh", text}; }

// The error's message, and that it is an invalid-config error.
std::string error_of(const std::string& text, const Json& vars) {
  try {
    render(t(text), vars);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "rendered without an error: " << text;
  return {};
}

// Found by tests/fuzz/template_fuzz.cc: every tag counted the newlines before it from the start
// (10000 nested sections: 115 s under ASan), and list sections nested in list sections multiply
// (30 levels of a two-element list: 2^30 passes). The first is linear now; the second an error.
TEST(Template, DeepNestingIsLinearAndNestedListsAreBounded) {
  std::string deep, lists;
  for (int i = 0; i < 5000; ++i) deep += "{{#on}}\n";
  deep += "x";
  for (int i = 0; i < 5000; ++i) deep += "{{/on}}";
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(render(t(deep), Json{{"on", true}}), std::string(5000, '\n') + "x");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  for (int i = 0; i < 30; ++i) lists += "{{#l}}";
  for (int i = 0; i < 30; ++i) lists += "{{/l}}";
  EXPECT_NE(error_of(lists, Json{{"l", {1, 2}}}).find("more than 100000 placeholders"), std::string::npos);
}

TEST(Template, ReplacesPlaceholdersWithStringsNumbersAndBools) {
  EXPECT_EQ(render(t("n={{n}} s={{s}} b={{b}} f={{f}}\n"), Json{{"n", 4}, {"s", "a b"}, {"b", true}, {"f", 0.5}}),
            "n=4 s=a b b=true f=0.5\n");
}

TEST(Template, LeavesShellBracesAlone) {
  const std::string text = "echo ${pids[@]} {x} $(( 1 + 2 )) }} {\n";
  EXPECT_EQ(render(t(text), Json::object()), text);
}

TEST(Template, KeepsASectionOnlyWhenItsValueIsSet) {
  const std::string text = "a\n{{#p}}#SBATCH --partition={{p}}\n{{/p}}b\n";
  EXPECT_EQ(render(t(text), Json{{"p", "gpu"}}), "a\n#SBATCH --partition=gpu\nb\n");
  for (const Json& unset : {Json(nullptr), Json(""), Json(0), Json(false)})
    EXPECT_EQ(render(t(text), Json{{"p", unset}}), "a\nb\n") << unset.dump();
}

TEST(Template, SectionsNest) {
  const std::string text = "{{#a}}A{{#b}}B{{/b}}{{/a}}.";
  EXPECT_EQ(render(t(text), Json{{"a", 1}, {"b", 1}}), "AB.");
  EXPECT_EQ(render(t(text), Json{{"a", 1}, {"b", 0}}), "A.");
  EXPECT_EQ(render(t(text), Json{{"a", 0}, {"b", 1}}), ".");
}

TEST(Template, AListSectionRepeatsOncePerElement) {
  const std::string text = "run{{#m}} -v {{.}}{{/m}} {{image}}{{#m}}{{#flag}}!{{/flag}}{{/m}}\n";
  EXPECT_EQ(render(t(text), Json{{"m", {"/a:/a", "/b:/b"}}, {"image", "i"}, {"flag", true}}),
            "run -v /a:/a -v /b:/b i!!\n");
  EXPECT_EQ(render(t(text), Json{{"m", Json::array()}, {"image", "i"}, {"flag", true}}), "run i\n");
  // Lists nest; an empty list's text is still checked for names.
  EXPECT_EQ(render(t("{{#o}}[{{#i}}{{.}}{{/i}}]{{/o}}"), Json{{"o", {1, 2}}, {"i", {"x", "y"}}}), "[xy][xy]");
  EXPECT_NE(error_of("{{#m}}{{nope}}{{/m}}", Json{{"m", Json::array()}}).find("x.sh:1: unknown placeholder 'nope'"),
            std::string::npos);
  EXPECT_NE(error_of("a\n{{#m}}{{.}}\n", Json{{"m", {"x"}}}).find("x.sh:2: section 'm' is never closed"),
            std::string::npos);
}

TEST(Template, RendersAnArgvOneArgumentPerLine) {
  const Template argv_t{"c.argv",
                        "# a comment {{not_a_tag}}\nrun\n{{#gpus}}\n--gpus\nall\n{{/gpus}}\n{{#env}}\n-e\n{{.}}\n{{/env}}\n"
                        "{{image}}\n"};
  EXPECT_EQ(render_argv(argv_t, Json{{"gpus", false}, {"env", {"A=x y", "B='q'"}}, {"image", "#i"}}),
            (std::vector<std::string>{"run", "-e", "A=x y", "-e", "B='q'", "#i"}));
  EXPECT_EQ(render_argv(argv_t, Json{{"gpus", true}, {"env", Json::array()}, {"image", "i"}}),
            (std::vector<std::string>{"run", "--gpus", "all", "i"}));
  try {
    render_argv(argv_t, Json{{"gpus", false}, {"env", {"A=1\n-v\n/:/host"}}, {"image", "i"}});
    ADD_FAILURE() << "a value with a newline became arguments";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("the value of 'env' holds a newline"), std::string::npos) << e.what();
  }
  // Errors name the template's own line, comments counted.
  try {
    render_argv(Template{"c.argv", "# one\n# two\n{{missing}}\n"}, Json::object());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.argv:3: unknown placeholder 'missing'"), std::string::npos) << e.what();
  }
}

TEST(Template, UnknownPlaceholderNamesFileLineAndName) {
  const std::string e = error_of("one\ntwo {{nodes}}\nthree {{gpus}}\n", Json{{"nodes", 2}});
  EXPECT_NE(e.find("x.sh:3: unknown placeholder 'gpus'"), std::string::npos) << e;
  EXPECT_NE(e.find("nodes"), std::string::npos) << "lists the names it knows: " << e;
}

TEST(Template, UnknownNameInASkippedSectionIsStillAnError) {
  const std::string e = error_of("{{#a}}\n{{typo}}\n{{/a}}", Json{{"a", false}});
  EXPECT_NE(e.find("x.sh:2: unknown placeholder 'typo'"), std::string::npos) << e;
}

TEST(Template, PlaceholderWithoutAValueIsAnError) {
  const std::string e = error_of("--account={{account}}\n", Json{{"account", nullptr}});
  EXPECT_NE(e.find("x.sh:1: placeholder 'account' has no value"), std::string::npos) << e;
  EXPECT_NE(error_of("{{o}}", Json{{"o", Json::object()}}).find("'o' has no value"), std::string::npos);
}

TEST(Template, MalformedTagsAreErrorsWithTheirLine) {
  EXPECT_NE(error_of("a\n{{ bad name }}", Json::object()).find("x.sh:2: '{{ bad name }}' is not a placeholder name"),
            std::string::npos);
  EXPECT_NE(error_of("{{open\n}}", Json::object()).find("x.sh:1: '{{' without '}}'"), std::string::npos);
  EXPECT_NE(error_of("x\n{{#a}}y", Json{{"a", 1}}).find("x.sh:2: section 'a' is never closed"), std::string::npos);
  EXPECT_NE(error_of("{{/a}}", Json{{"a", 1}}).find("x.sh:1: '{{/a}}' closes no open section"), std::string::npos);
  EXPECT_NE(error_of("{{#a}}{{#b}}{{/a}}{{/b}}", Json{{"a", 1}, {"b", 1}}).find("the open section is 'b'"),
            std::string::npos);
}

TEST(Template, LoadsTheEmbeddedCopyUnlessTheDirectoryOverridesIt) {
  ::unsetenv("VERLCTL_TEMPLATE_DIR");
  const Template embedded = load("sbatch.sh");
  EXPECT_EQ(embedded.origin, "templates/sbatch.sh (embedded)");
  EXPECT_NE(embedded.text.find("#SBATCH --nodes={{nodes}}"), std::string::npos);

  const testing::TempDir tmp("tmpl");
  const fs::path dir = tmp.path();
  std::ofstream(dir / "sbatch.sh") << "#!/bin/sh\n{{nodes}} {{nope}}\n";
  ::setenv("VERLCTL_TEMPLATE_DIR", dir.c_str(), 1);
  const Template over = load("sbatch.sh");
  EXPECT_EQ(over.origin, (dir / "sbatch.sh").string());
  try {
    render(over, Json{{"nodes", 1}});
    ADD_FAILURE() << "the override's unknown placeholder must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "sbatch.sh").string() + ":2: unknown placeholder 'nope'"),
              std::string::npos)
        << e.what();
  }
  // A file the directory lacks still comes from the binary.
  EXPECT_EQ(load("job.yaml").origin, "templates/job.yaml (embedded)");
  ::unsetenv("VERLCTL_TEMPLATE_DIR");
}

TEST(Template, MissingTemplateIsAnErrorNamingIt) {
  try {
    load("no-such.sh");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kInvalidConfig);
    EXPECT_NE(std::string(e.what()).find("no template 'no-such.sh'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace verl::tmpl
