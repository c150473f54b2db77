"""How generated pages look (sgemm.style): code spans as HTML."""

from sgemm.style import html_with_code


def test_inline_code_becomes_html_code_after_escaping():
    assert html_with_code("Command: `sgemm publish --html site`") == "Command: <code>sgemm publish --html site</code>"
    assert html_with_code("a <b> & `x<y>` and `z`") == "a &lt;b&gt; &amp; <code>x&lt;y&gt;</code> and <code>z</code>"
    assert html_with_code("no code here") == "no code here"
