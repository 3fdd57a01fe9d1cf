"""One shared list of hostile text inputs: what a class might type (or paste) into any text box.

Each entry has a short id (used in test ids and reports), the text, and flags that say what a
correct page must not do with it:
- `markup`: Markdown/HTML/LaTeX syntax. Shown through a Markdown-rendering element it would be
  interpreted, so its raw form must never appear verbatim in st.markdown/st.caption/st.warning/...
  bodies (escaped text carries backslashes; st.text/st.code/dataframes are safe).
- `huge`: a million characters; tests run these once per page, not per variation.
- `surrogate`: contains an unpaired UTF-16 surrogate. Python strings can hold one, but UTF-8 cannot:
  Streamlit refuses to serialise it (AppTest raises UnicodeEncodeError while building the widget
  state, before any page code runs), and a browser's protobuf encoder sends the bytes of a lone
  surrogate that the server cannot decode as UTF-8. Either way the page script never sees it; the
  tests check that the page keeps working afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.model.tokenizer import MASK_CHAR, PAD_CHAR

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class HostileInput:
    id: str
    text: str
    markup: bool = False
    huge: bool = False
    surrogate: bool = False

    def __repr__(self) -> str:  # pytest shows ids; a 1M-character repr helps nobody
        return f"HostileInput({self.id!r}, {len(self.text)} chars)"


HOSTILE_INPUTS: list[HostileInput] = [
    # --- nothing, or almost nothing
    HostileInput("empty", ""),
    HostileInput("space", " "),
    HostileInput("whitespace_only", " \t \n\r\n  \u00a0\u2003\u3000"),
    HostileInput("newlines_only", "\n" * 50),
    HostileInput("single_char", "a"),
    HostileInput("single_unknown_char", "\u0416"),
    # --- size
    HostileInput("10k_chars", ("Ada Lovelace was born in London . " * 300)[:10_000]),
    HostileInput("1M_chars", ("Where was Alan Turing born? " * 40_000)[:1_000_000], huge=True),
    HostileInput("long_word_10k", "x" * 10_000),
    HostileInput("long_word_unknown", "\u00e9" * 5_000),
    HostileInput("10k_lines", "a\n" * 5_000),
    # --- control characters and encodings
    HostileInput("nul", "Ada\x00Lovelace"),
    HostileInput("nul_only", "\x00"),
    HostileInput("control_chars", "".join(chr(c) for c in range(1, 32)) + "\x7f"),
    HostileInput("c1_controls", "".join(chr(c) for c in range(0x80, 0xa0))),
    HostileInput("ansi_escape", "\x1b[31mred\x1b[0m \x1b]0;title\x07"),
    HostileInput("bom_and_zero_width", "\ufeffAda\u200bLove\u200dlace\u2060"),
    HostileInput("bidi_override", "Ada \u202eecalevoL\u202c born?"),
    HostileInput("line_separators", "Ada\u2028Lovelace\u2029born\u0085here"),
    HostileInput("replacement_char", "\ufffd\ufffd\ufffd"),
    HostileInput("noncharacters", "\ufffe\uffff\U0010ffff"),
    HostileInput("unpaired_high_surrogate", "Ada \ud800 Lovelace", surrogate=True),
    HostileInput("unpaired_low_surrogate", "\udc00", surrogate=True),
    # --- scripts, emoji, combining marks
    HostileInput("emoji", "Ada 👩🏽‍💻 Lovelace 🇬🇧 born 🎉"),
    HostileInput("emoji_only", "🔥" * 200),
    HostileInput("combining_marks", "Z\u0351\u0362\u0337a\u0352\u0306l\u0363\u0325g\u036fo" + "\u0301" * 300),
    HostileInput("rtl_arabic", "أين ولد أحمد شوقي؟"),
    HostileInput("rtl_hebrew_mixed", "Where was שלום born? 123"),
    HostileInput("cjk", "艾达·洛夫莱斯出生在哪里？"),
    HostileInput("fullwidth", "Ｗｈｅｒｅ　ｗａｓ　Ａｄａ　ｂｏｒｎ？"),
    HostileInput("math_alphanumerics", "\U0001d400\U0001d41d\U0001d41a \U0001d4db\U0001d4f8\U0001d500"),
    # --- HTML and scripts
    HostileInput("script_tag", "<script>alert('xss')</script>", markup=True),
    HostileInput("img_onerror", '<img src=x onerror="alert(1)">', markup=True),
    HostileInput("html_bold", "<b>bold</b> and <i>italic</i><br>", markup=True),
    HostileInput("html_link_js", '<a href="javascript:alert(1)">click me</a>', markup=True),
    HostileInput("html_entities", "&lt;script&gt; &amp; &#x3C;b&#x3E;", markup=True),
    HostileInput("html_comment_style", "<!-- x --><style>*{display:none}</style>", markup=True),
    # --- Markdown and LaTeX
    HostileInput("md_bold", "**bold** __also__ *it* ~~gone~~", markup=True),
    HostileInput("md_heading", "# Heading\n## Sub", markup=True),
    HostileInput("md_link", "[click](javascript:alert(1)) ![img](http://127.0.0.1:9/x.png)", markup=True),
    HostileInput("md_code_fence", "```\ncode\n```", markup=True),
    HostileInput("md_table", "| a | b |\n|---|---|\n| 1 | 2 |", markup=True),
    HostileInput("streamlit_directives", ":red[red] :material/home: :rainbow-background[x]", markup=True),
    HostileInput("latex_inline", "$x^2 + \\frac{1}{2}$", markup=True),
    HostileInput("latex_block", "$$\\int_0^1 f(x)\\,dx$$", markup=True),
    HostileInput("backslashes", "C:\\Users\\ada\\file.txt \\n \\\\ \\", markup=True),
    # --- the vocabulary's reserved characters
    HostileInput("mask_char", f"Where was Ada Lovelace born?{MASK_CHAR}"),
    HostileInput("pad_char", f"Ada{PAD_CHAR}{PAD_CHAR}Lovelace"),
    HostileInput("only_reserved", (MASK_CHAR + PAD_CHAR) * 40),
    # --- things that look like something else
    HostileInput("numbers_as_name", "12345"),
    HostileInput("negative_float", "-1e308"),
    HostileInput("nan_inf", "NaN inf -inf"),
    HostileInput("question_no_name", "Where was born?"),
    HostileInput("question_nested", "Where was Where was Ada born? born?"),
    HostileInput("format_string", "{0} {name} %s %d {{}} {__class__}"),
    HostileInput("sql_like", "'; DROP TABLE people; --"),
    HostileInput("path_traversal", "../../../../etc/passwd"),
    HostileInput("home_of_unknown_user", "~nosuchuser_attention_lab/models"),
    HostileInput("long_absolute_path", "/tmp/" + "x" * 300 + "/models"),
    HostileInput("url", "http://127.0.0.1:9/?model=../../etc&text=%00"),
    HostileInput("json", '{"model": "x", "__proto__": {"a": 1}}'),
    HostileInput("tab_separated", "Where was Ada born?\tLondon\textra"),
]

MARKUP_INPUTS = [h for h in HOSTILE_INPUTS if h.markup]
ORDINARY_INPUTS = [h for h in HOSTILE_INPUTS if not h.huge]
HUGE_INPUTS = [h for h in HOSTILE_INPUTS if h.huge]


def by_id(id_: str) -> HostileInput:
    return next(h for h in HOSTILE_INPUTS if h.id == id_)


assert len({h.id for h in HOSTILE_INPUTS}) == len(HOSTILE_INPUTS), "hostile input ids must be unique"


def app_pages() -> list[tuple[str, str, bool]]:
    """(file, title, default) of every page of the app, in order: a view of the one page list
    (pages.APP_PAGES), so every suite that walks the pages covers a new page as soon as it is listed."""
    from ui import APP_PAGES

    return [(page.file, page.title, page.default) for page in APP_PAGES]
