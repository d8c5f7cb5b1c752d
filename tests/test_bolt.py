"""The edit-format parser: what the coder writes becomes files, control words or feedback."""

from webgen_agent.tools.bolt import parse_reply


def test_files_with_attributes_in_any_order_and_entities_unescaped():
    reply = """Here you go.
<boltArtifact title='Todo' id="t1">
<boltAction filePath="src/App.jsx" type="file">
const ok = a &lt; b &amp;&amp; c &gt; d;
</boltAction>
<boltAction type='shell'>npm run lint</boltAction>
<boltAction type="file" filePath='index.html'><div>&quot;hi&quot;</div></boltAction>
</boltArtifact>"""
    parsed = parse_reply(reply)
    assert parsed.kind == "edit"
    assert parsed.format_ok
    assert parsed.title == "Todo"
    assert [f.path for f in parsed.files] == ["src/App.jsx", "index.html"]
    assert parsed.files[0].content == "const ok = a < b && c > d;\n"
    assert parsed.files[1].content == '<div>"hi"</div>'
    assert parsed.shell == ["npm run lint"]


def test_control_words():
    assert parse_reply("screenshot_validated").kind == "screenshot_validated"
    assert parse_reply("  `finish`  ").kind == "finish"
    assert parse_reply("The site is complete.\n\nfinish").kind == "finish"
    long = parse_reply("finish " + "x" * 500)
    assert long.kind == "finish" and not long.format_ok


def test_malformed_replies_become_feedback_not_exceptions():
    for text in ("", "   ", "I think the website looks great.", "<boltArtifact id='a'></boltArtifact>"):
        parsed = parse_reply(text)
        assert parsed.kind == "malformed"
        assert not parsed.format_ok
        assert parsed.problems and all(isinstance(p, str) and p for p in parsed.problems)


def test_unclosed_action_is_reported_and_skipped():
    reply = """<boltArtifact id="a" title="b">
<boltAction type="file" filePath="a.js">ok()</boltAction>
<boltAction type="file" filePath="b.js">cut off here"""
    parsed = parse_reply(reply)
    assert parsed.kind == "edit"
    assert [f.path for f in parsed.files] == ["a.js"]
    assert not parsed.format_ok
    assert any("not closed" in p for p in parsed.problems)


def test_control_word_mixed_with_code_is_applied_but_marked():
    reply = """<boltArtifact id="a" title="b"><boltAction type="file" filePath="a.js">x</boltAction></boltArtifact>
finish"""
    parsed = parse_reply(reply)
    assert parsed.kind == "edit" and not parsed.format_ok


def test_heavy_repetition_is_not_format_ok():
    body = "\n".join(["const value = compute(value);"] * 200)
    reply = f'<boltArtifact id="a" title="b"><boltAction type="file" filePath="a.js">{body}</boltAction></boltArtifact>'
    assert not parse_reply(reply).format_ok


def test_whole_reply_in_a_code_fence():
    reply = '```xml\n<boltArtifact id="a" title="b"><boltAction type="file" filePath="a.js">x</boltAction></boltArtifact>\n```'
    parsed = parse_reply(reply)
    assert parsed.kind == "edit" and parsed.files[0].content == "x"
