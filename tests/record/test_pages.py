"""Only the lines between a page's marker lines are written; a page without the markers it needs
is one clear error."""

import pytest

from qkvmt.errors import UserError
from qkvmt.record import pages, tables

PAGE = "# Title\n\nbefore\n<!-- results:recipes:begin -->\nold table\n<!-- results:recipes:end -->\nafter\n"


def test_the_region_gets_the_table_and_the_rest_stays(record):
    out = pages.render(PAGE, record, "page.md")
    assert out.startswith("# Title\n\nbefore\n<!-- results:recipes:begin -->\n")
    assert out.endswith("<!-- results:recipes:end -->\nafter\n")
    assert tables.recipes(record) in out and "old table" not in out
    assert pages.render(out, record, "page.md") == out  # a second run changes nothing


def test_the_readme_region_is_the_glance_table(record):
    out = pages.render("x\n<!-- results:begin -->\n<!-- results:end -->\n", record, "README.md", required=(None,))
    assert tables.glance(record) in out


def test_a_page_without_its_required_markers_says_which_lines_to_add(record):
    with pytest.raises(UserError, match="README.md has no lines <!-- results:begin --> ... <!-- results:end -->"):
        pages.render("no markers here\n", record, "README.md", required=(None,))


@pytest.mark.parametrize(
    "text, message",
    [
        ("<!-- results:recipes:begin -->\nno end\n", "has no <!-- results:recipes:end -->"),
        ("<!-- results:gossip:begin -->\n<!-- results:gossip:end -->\n", "names no table"),
    ],
)
def test_broken_markers_are_refused(record, text, message):
    with pytest.raises(UserError, match=message):
        pages.render(text, record, "page.md")
