"""The README is a front page and the reference lives in Docs/: every relative link in the
project's Markdown (README, Docs/, Profiles/, Scenarios/, Examples/) leads to a file that exists,
and an anchor to a heading of that file; the front page stays short and names every Docs page."""
import glob
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def markdown_files():
    files = [os.path.join(ROOT, "README.md")]
    for folder in ("Docs", "Profiles", "Scenarios", "Examples"):
        files += glob.glob(os.path.join(ROOT, folder, "**", "*.md"), recursive=True)
    return sorted(f for f in files if "/.build" not in f)


def outside_code(text):
    """The lines of a Markdown text outside fenced code blocks."""
    fence = False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
            continue
        if not fence:
            yield line


def anchors(path):
    """GitHub's anchors for a file's headings: lower case, punctuation dropped, spaces as hyphens,
    a repeated one numbered."""
    seen, found = {}, set()
    for line in outside_code(open(path, encoding="utf-8").read()):
        match = re.match(r"^#{1,6} (.*)$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        if slug in seen:
            seen[slug] += 1
            slug = f"{slug}-{seen[slug]}"
        else:
            seen[slug] = 0
        found.add(slug)
    return found


def test_every_relative_link_leads_to_a_file_and_a_heading_that_exist():
    broken = []
    for path in markdown_files():
        for line in outside_code(open(path, encoding="utf-8").read()):
            for target in LINK.findall(line):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue
                file_part, _, anchor = target.partition("#")
                destination = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                where = os.path.relpath(path, ROOT)
                if not os.path.exists(destination):
                    broken.append(f"{where}: {target} (no such file)")
                elif anchor and destination.endswith(".md") and anchor not in anchors(destination):
                    broken.append(f"{where}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_readme_is_a_front_page_naming_every_docs_page():
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert len(readme.splitlines()) < 300
    for page in glob.glob(os.path.join(ROOT, "Docs", "*.md")):
        name = os.path.basename(page)
        assert f"(Docs/{name}" in readme, f"the README's table of contents leaves out Docs/{name}"
    # The two set-up commands stay on the front page.
    assert "scripts/netcond demo" in readme and "scripts/test" in readme
