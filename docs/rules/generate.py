#!/usr/bin/env python3
"""Generates docs/rules/<id>.md from the rule catalogue and each rule's lit
test, so the catalogue stays the single source of the docs.

  docs/rules/generate.py --fabricize build/bin/fabricize          # write the pages
  docs/rules/generate.py --fabricize build/bin/fabricize --check  # fail if stale or empty
  docs/rules/generate.py --self-test ...                          # first prove the checks fail

Each page shows the rule's summary, and the rule's test program (test/rules/
<id>.cpp, without its RUN/CHECK lines) before and after fabricize. A rule
whose test migrates a project of several files (`cp -r %S/Inputs/<name>` in
its RUN lines, for a rule that works across files) shows each project's
files before and after fabricize ran on the project's sources. The CMake
migration (fabric-cmake, tool/edits/BuildFiles.cpp) is not in the catalogue; its
page shows the CMake files of its test's project the same way.

Every page must show code: a Before or After section that is empty, or
whose code is only comments, fails the run (--check or not), as does a page
that is not what the catalogue and the tests generate (--check).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
STUBS = os.path.join(ROOT, "test", "stubs")
DIRECTIVE = re.compile(r"^\s*//\s*(RUN|CHECK|[A-Z]+(-[A-Z]+)*(-NEXT|-NOT)?):")
PROJECT_COPY = re.compile(r"^\s*//\s*RUN:.*\bcp -r %S/Inputs/([\w.-]+)\s")
FINDING = re.compile(r"^(.*?):(\d+):(\d+): (warning|error): ")
HEADER_SUFFIXES = (".h", ".hpp", ".hh")
SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx")


def is_build_file(path):
    return os.path.basename(path) == "CMakeLists.txt" or path.endswith(".cmake")


# Migrations migrate applies that are not rules of the catalogue
# (`fabricize --list-rules` does not print them): id -> where it lives, the
# header whose opening comment is its summary, and the test whose project
# the page shows (its build files only: the sources are the rules' business).
BUILD_RULES = {
    "fabric-cmake": {"source": "tool/edits/BuildFiles.cpp", "summary": "tool/edits/BuildFiles.h",
                     "test": "test/tool/cmake-nested.cpp", "shows": is_build_file},
}


def example_source(test_path):
    lines = []
    for line in open(test_path):
        if DIRECTIVE.match(line) or re.match(r"^\s*//\s*$", line):
            continue
        lines.append(line)
    return "".join(lines).strip() + "\n"


def example_projects(test_path):
    """[(folder, description)] for each project the test copies from its
    Inputs: the folder, and the comment paragraph above the RUN line that
    copies it (comment markers removed)."""
    projects, paragraph, in_paragraph = [], [], False
    for line in open(test_path):
        copy = PROJECT_COPY.match(line)
        if copy:
            folder = os.path.join(os.path.dirname(test_path), "Inputs", copy.group(1))
            projects.append((folder, " ".join(paragraph)))
        if DIRECTIVE.match(line) or re.match(r"^\s*//\s*$", line):
            in_paragraph = False
            continue
        if line.lstrip().startswith("//"):
            if not in_paragraph:
                paragraph, in_paragraph = [], True
            paragraph.append(line.strip()[2:].strip())
    return projects


def migrate(fabricize, source):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "example.cpp")
        with open(path, "w") as f:
            f.write(source)
        result = subprocess.run([fabricize, "--stdout", "--quiet", path, "--", "-std=c++17", "-isystem", STUBS],
                                capture_output=True, text=True)
        if result.returncode not in (0, 1):
            sys.exit(f"fabricize failed on the example:\n{result.stderr}")
        findings = [re.sub(r"^.*example\.cpp:", "example.cpp:", l)
                    for l in result.stderr.splitlines() if "warning:" in l]
        return result.stdout, findings


def project_files(folder):
    """The project's files, relative: headers first, then the rest, each by name."""
    found = []
    for directory, _, names in os.walk(folder):
        for name in names:
            found.append(os.path.relpath(os.path.join(directory, name), folder))
    return sorted(found, key=lambda p: (not p.endswith(HEADER_SUFFIXES), p))


def migrate_project(fabricize, folder):
    """Runs fabricize on a copy of the project's sources, as a user would
    (`fabricize <sources> -o out`): ({relative path: text} of the migrated
    tree, the command as shown, findings with relative paths)."""
    with tempfile.TemporaryDirectory() as tmp:
        project, out = os.path.join(tmp, "project"), os.path.join(tmp, "out")
        shutil.copytree(folder, project)
        files = project_files(project)
        sources = [p for p in files if p.endswith(SOURCE_SUFFIXES)]
        # Headers under an include/ folder are found through it, as the project's build says.
        includes = sorted({"/".join(p.split("/")[:p.split("/").index("include") + 1])
                           for p in files if "include" in p.split("/")[:-1]})
        flags = ["-std=c++17", "-isystem", STUBS]
        for folder_name in includes:
            flags += ["-I", os.path.join(project, folder_name)]
        result = subprocess.run([fabricize, *[os.path.join(project, s) for s in sources], "--root", project,
                                 "-o", out, "--quiet", "--", *flags], capture_output=True, text=True)
        if result.returncode not in (0, 1):
            sys.exit(f"fabricize failed on the example project {folder}:\n{result.stderr}")
        migrated = {}
        for path in files:
            target = os.path.join(out, path)
            migrated[path] = open(target).read() if os.path.exists(target) else None
        findings = []
        for line in result.stderr.splitlines():
            if FINDING.match(line):
                for prefix in (os.path.realpath(project) + "/", project + "/"):
                    line = line.replace(prefix, "")
                findings.append(line)
        command = "Migrated with `" + " ".join(["fabricize", *sources, "-o", "out"]) + "` in the project's folder"
        if includes:
            command += ", its headers found with " + ", ".join(f"`-I {p}`" for p in includes)
        command += " (the sources parsed against test/stubs, the LibTorch stub the tests use)."
        return migrated, command, findings


STEPS = {"1": "step 1 (create the Fabric)", "2": "step 2 (launch)", "3": "step 3 (setup)",
         "4": "step 4 (device moves)", "5": "step 5 (backward)", "+": "beyond the five steps",
         "build": "of the project's build files (beside the five steps)"}


def fence(path):
    return "cmake" if is_build_file(path) else "cpp"


def project_sections(fabricize, test, shows):
    """The examples of a project test: per project, its description, then
    Before and After with each shown file."""
    projects = example_projects(test)
    text = []
    for number, (folder, description) in enumerate(projects, 1):
        migrated, command, findings = migrate_project(fabricize, folder)
        shown = [p for p in project_files(folder) if shows(p)]
        title = f"Example {number}: " if len(projects) > 1 else "Example: "
        rel = os.path.relpath(folder, ROOT)
        text += [f"## {title}[{rel}](../../{rel})", ""]
        if description:
            text += [description, ""]
        text += [command, "", "### Before", ""]
        for path in shown:
            text += [f"`{path}`:", "", f"```{fence(path)}", open(os.path.join(folder, path)).read().rstrip(),
                     "```", ""]
        text += ["### After `fabricize`", ""]
        for path in shown:
            after = migrated[path]
            if after is None:
                sys.exit(f"fabricize wrote no {path} for {folder}")
            unchanged = after == open(os.path.join(folder, path)).read()
            text += [f"`{path}`" + (" (unchanged):" if unchanged else ":"), "", f"```{fence(path)}",
                     after.rstrip(), "```", ""]
        if findings:
            text += ["### Findings reported", "", "```", *findings, "```", ""]
    return text


def page(fabricize, rule_id, step, summary):
    build_rule = BUILD_RULES.get(rule_id)
    if build_rule:
        test = os.path.join(ROOT, build_rule["test"])
        source = build_rule["source"]
    else:
        test = os.path.join(ROOT, "test", "rules", rule_id + ".cpp")
        source = f"rewrite-rules/{rule_id}.cpp"
    test_rel = os.path.relpath(test, ROOT)
    if not os.path.exists(test):
        sys.exit(f"rule {rule_id} has no lit test at {test_rel}")
    projects = example_projects(test)
    origin = "the catalogue" if not build_rule else build_rule["summary"]
    sources = f"{origin}, {test_rel} and its inputs" if projects else f"{origin} and {test_rel}"
    text = [f"# {rule_id}", "",
            f"<!-- Generated by docs/rules/generate.py from {sources}. -->", "",
            f"Migration {STEPS.get(step, step)}.", "", summary, "",
            f"- Rule: [{source}](../../{source})",
            f"- Test: [{test_rel}](../../{test_rel})", ""]
    if projects:
        shows = build_rule["shows"] if build_rule else (lambda path: True)
        text += project_sections(fabricize, test, shows)
        return "\n".join(text)
    before = example_source(test)
    after, findings = migrate(fabricize, before)
    text += ["## Before", "", "```cpp", before.rstrip(), "```", "",
             "## After `fabricize`", "", "```cpp", after.rstrip(), "```", ""]
    if findings:
        text += ["## Findings reported", "", "```", *findings, "```", ""]
    return "\n".join(text)


def header_summary(header):
    """The opening comment of a header, as one paragraph."""
    lines = []
    for line in open(os.path.join(ROOT, header)):
        if not line.startswith("//"):
            break
        lines.append(line[2:].strip())
    return " ".join(lines)


def index(rules, build_rules):
    text = ["# Rule catalogue", "",
            "<!-- Generated by docs/rules/generate.py. -->", "",
            "Every rule has an id, a file in `rewrite-rules/`, a lit test in `test/rules/` and this page.",
            "`fabricize --list-rules` prints the same list.", "",
            "| id | step | what it does |", "|---|---|---|"]
    for rule_id, step, summary in rules:
        text.append(f"| [{rule_id}]({rule_id}.md) | {step} | {summary.replace('|', '/')} |")
    text += ["", "## Build files", "",
             "`fabricize` migrates a project's build files beside its sources. This is not a rule of the",
             "catalogue (not in `--list-rules`, not in lint), but its edits and notes are reported under its id.", "",
             "| id | what it does | where |", "|---|---|---|"]
    for rule_id, summary in build_rules:
        source = BUILD_RULES[rule_id]["source"]
        text.append(f"| [{rule_id}]({rule_id}.md) | {summary.replace('|', '/')} | [{source}](../../{source}) |")
    return "\n".join(text) + "\n"


# --- the checks ---------------------------------------------------------------

def code_lines(language, code):
    """The lines of a code block that are not comments or blank."""
    if language == "cmake":
        return [l for l in code.splitlines() if l.strip() and not l.strip().startswith("#")]
    code = re.sub(r"/\*.*?\*/", "", code, flags=re.S)
    return [l for l in code.splitlines() if l.strip() and not l.strip().startswith("//")]


def article(word):
    return "an" if word[0] in "AEIOU" else "a"


def page_problems(name, text):
    """What makes a page show no real code: no Before or After section, one
    with no code block, or a code block of comments only."""
    problems = []
    sections = {"Before": 0, "After": 0}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        heading = re.match(r"^(#+) (Before|After)\b", lines[i])
        if not heading:
            i += 1
            continue
        kind = heading.group(2)
        sections[kind] += 1
        i += 1
        # The section runs to the next heading outside a code block (a CMake
        # comment inside one starts with "# " too).
        blocks, block, language = [], None, None
        while i < len(lines) and (block is not None or not re.match(r"^#+ ", lines[i])):
            line = lines[i]
            fence_line = re.match(r"^```(\w*)\s*$", line)
            if fence_line and block is None:
                block, language = [], fence_line.group(1)
            elif fence_line and block is not None:
                blocks.append((language, "\n".join(block)))
                block = None
            elif block is not None:
                block.append(line)
            i += 1
        if not blocks:
            problems.append(f"{name}: {article(kind)} '{kind}' section shows no code")
        for language, code in blocks:
            if not code_lines(language, code):
                problems.append(f"{name}: {article(kind)} '{kind}' section shows a code block of comments only")
    for kind, count in sections.items():
        if count == 0:
            problems.append(f"{name}: no '{kind}' section")
    if sections["Before"] != sections["After"]:
        problems.append(f"{name}: {sections['Before']} 'Before' but {sections['After']} 'After' sections")
    return problems


def stale_pages(pages, folder):
    """Pages whose file differs from what was generated, and files that no
    rule generates."""
    stale = []
    for name, text in pages.items():
        path = os.path.join(folder, name)
        current = open(path).read() if os.path.exists(path) else None
        if current != text:
            stale.append(name)
    extra = sorted(f for f in os.listdir(folder) if f.endswith(".md") and f not in pages)
    return stale, extra


def self_test():
    """The checks, each shown to fail on a page made to break it."""
    good = ("# r\n\n## Before\n\n```cpp\n// a comment\nint main() {}\n```\n\n"
            "## After `fabricize`\n\n`CMakeLists.txt`:\n\n```cmake\n# a comment\nfind_package(Fabric)\n```\n")
    cases = {
        "a page with code": (good, None),
        "a Before of comments only": (good.replace("int main() {}\n", ""), "comments only"),
        "an After of comments only": (good.replace("find_package(Fabric)\n", ""), "comments only"),
        "an After with no code block": (good.split("## After")[0] + "## After `fabricize`\n\nNothing.\n",
                                        "shows no code"),
        "an empty Before": (good.replace("```cpp\n// a comment\nint main() {}\n```\n", ""), "shows no code"),
        "no After": (good.split("## After")[0], "no 'After' section"),
        "a C comment only": (good.replace("// a comment\nint main() {}\n", "/* int main() {}\n */\n"),
                             "comments only"),
    }
    failures = []
    for case, (text, expected) in cases.items():
        problems = page_problems("page.md", text)
        if expected is None and problems:
            failures.append(f"{case}: reported {problems}")
        elif expected is not None and not any(expected in p for p in problems):
            failures.append(f"{case}: not caught (expected '{expected}', got {problems})")
        else:
            print(f"self-test: {case}: " + ("passes" if expected is None else "caught"))
    with tempfile.TemporaryDirectory() as tmp:
        pages = {"a.md": good, "b.md": good}
        for name, text in pages.items():
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        with open(os.path.join(tmp, "b.md"), "a") as f:
            f.write("edited by hand\n")
        with open(os.path.join(tmp, "gone.md"), "w") as f:
            f.write(good)
        stale, extra = stale_pages(pages, tmp)
        if stale != ["b.md"] or extra != ["gone.md"]:
            failures.append(f"a stale page and a page of no rule: got stale={stale}, extra={extra}")
        else:
            print("self-test: a stale page and a page of no rule: caught")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fabricize", required=True)
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--self-test", action="store_true",
                        help="first check that the checks catch a stale page and pages without code")
    args = parser.parse_args()
    if args.self_test:
        failures = self_test()
        if failures:
            print("generate.py self-test FAILED:\n  " + "\n  ".join(failures))
            sys.exit(1)
    listing = subprocess.run([args.fabricize, "--list-rules"], capture_output=True, text=True, check=True)
    rules = [tuple(line.split("\t", 2)) for line in listing.stdout.splitlines() if line]
    build_rules = [(rule_id, header_summary(spec["summary"])) for rule_id, spec in BUILD_RULES.items()]
    pages = {f"{rule_id}.md": page(args.fabricize, rule_id, step, summary) for rule_id, step, summary in rules}
    for rule_id, summary in build_rules:
        pages[f"{rule_id}.md"] = page(args.fabricize, rule_id, "build", summary)
    pages["README.md"] = index(rules, build_rules)
    empty = [p for name, text in pages.items() if name != "README.md" for p in page_problems(name, text)]
    stale, extra = stale_pages(pages, HERE)
    if args.check:
        if stale or extra:
            print("stale rule pages: " + ", ".join(stale + extra) +
                  "\nregenerate with: docs/rules/generate.py --fabricize build/bin/fabricize")
        if empty:
            print("rule pages that show no code:\n  " + "\n  ".join(empty))
        if stale or extra or empty:
            sys.exit(1)
        print(f"{len(pages)} rule pages match the catalogue and show code before and after")
    else:
        for name in stale:
            with open(os.path.join(HERE, name), "w") as f:
                f.write(pages[name])
        for f in extra:
            os.remove(os.path.join(HERE, f))
        print(f"wrote {len(stale)} of {len(pages)} pages")
        if empty:
            print("rule pages that show no code:\n  " + "\n  ".join(empty))
            sys.exit(1)


if __name__ == "__main__":
    main()
