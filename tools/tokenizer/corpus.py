"""Seeded test corpus for tokenizer goldens: handwritten categories mixed by a generator.

Every string is short (a few hundred characters at most) so golden files stay small. The mix
covers prose, code in several languages, CJK, Arabic, Devanagari and other scripts, emoji
(ZWJ sequences, skin tones, flags, keycaps), combining marks and strings that NFC changes,
whitespace and newline runs, digits of every length, special tokens inside text, text around
<think>, random assigned code points, and (as raw bytes) invalid UTF-8.
"""

import random
import unicodedata

ENGLISH = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world!",
    "I can't believe it's already 2024; they'll say we've done it.",
    "She said: \"Don't touch that!\" -- and then left.",
    "Speculative decoding drafts k tokens and verifies them in one forward pass.",
    "It's a truth universally acknowledged, that a single man in possession of a good fortune must be in want of a wife.",
    "Mr. O'Neil's dog isn't here; WE'LL SEE, YOU'RE RIGHT, HE'D KNOW, I'M SURE, THEY'VE GONE.",
    "e.g. i.e. etc. vs. a.m. p.m. U.S.A. Ph.D.",
    "Prices rose 3.5% to $1,234.56 (up from $999.99) on 2023-11-05 at 14:30 UTC.",
    "   leading spaces and trailing spaces   ",
    "Tabs\tbetween\twords\tand\ttrailing\t",
    "Question? Answer! Ellipsis... Interrobang?! Em—dash and en–dash.",
    "ALL CAPS SENTENCE WITH NUMBERS 123 AND SYMBOLS #@!",
    "lowercase only with no punctuation at all",
    "MixedCase camelCase PascalCase snake_case kebab-case SCREAMING_SNAKE",
    "Email me at first.last+tag@example.co.uk or visit https://example.com/path?q=1&r=2#frag.",
    "File paths: /usr/local/bin/python3, C:\\Users\\Admin\\Desktop\\notes.txt, ~/.config/app.toml",
    "Markdown: **bold**, _italic_, `code`, [link](http://a.b), > quote, - item",
    "| col1 | col2 |\n|------|------|\n| a    | b    |",
    "Dear Sir or Madam,\n\nI am writing to inform you...\n\nBest regards,\nJohn",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D",
    "rock'n'roll, y'all, ma'am, o'clock, '90s, 'tis",
    "A sentence with a very long word: pneumonoultramicroscopicsilicovolcanoconiosis.",
    "Antidisestablishmentarianism and floccinaucinihilipilification.",
    "The year 1999 ended; 2000 began. 007 and 0.0001 and 1e-9 and 6.022e23.",
    "naïve café résumé coöperate façade jalapeño piñata Zürich São Paulo",
    "Straße, Æsir, Øresund, Œuvre, ĳssel, ſtraße",
    "\"Smart quotes\" ‘single’ «guillemets» „German“ ‹angle›",
    "Math: ∀x∈ℝ, x²≥0; ∑ᵢ aᵢ = π ≈ 3.14159; √2; ∞; ≠; ≤; ≥",
    "Currency: € £ ¥ ₹ ₩ ₽ ¢ ₿ $",
    "Arrows → ← ↑ ↓ ⇒ ⇔ and box drawing ┌─┐│└┘",
    "Control chars: bell\x07 escape\x1b[31mred\x1b[0m delete\x7f nul\x00 end",
    "Windows line endings\r\nsecond line\r\nthird line",
    "Old Mac line endings\rsecond\rthird",
    "Form feed\x0cand vertical tab\x0b here",
    "Unicode spaces: no\u00a0break, thin\u2009space, ideographic\u3000space, nel\u0085here, ls\u2028ps\u2029end",
    "Zero width: a\u200bb\u200cc\u200dd\ufeffe and soft\u00adhyphen",
    "Mongolian vowel separator\u180ehere and narrow\u202fnbsp",
]

CODE = [
    "def fib(n: int) -> int:\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "import numpy as np\n\nx = np.arange(10)\nprint(x[::2], x.sum())  # comment\n",
    "class Foo(Bar):\n    \"\"\"Docstring.\"\"\"\n\n    def __init__(self, *args, **kwargs):\n        super().__init__(*args, **kwargs)\n",
    "#include <vector>\n\nint main() {\n  std::vector<int> v{1, 2, 3};\n  for (auto& x : v) x *= 2;\n  return 0;\n}\n",
    "template <typename T>\nconstexpr T clamp(T x, T lo, T hi) noexcept { return x < lo ? lo : (x > hi ? hi : x); }",
    "const add = (a, b) => a + b;\nconsole.log(`sum: ${add(1, 2)}`);\nexport default { add };\n",
    "fn main() {\n    let mut v: Vec<u32> = Vec::new();\n    v.push(42);\n    println!(\"{:?}\", v);\n}\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello\")\n}\n",
    "public static void main(String[] args) {\n    System.out.println(\"Hi\");\n}",
    "SELECT id, name, COUNT(*) AS n\nFROM users u\nJOIN orders o ON o.user_id = u.id\nWHERE u.created_at > '2024-01-01'\nGROUP BY 1, 2\nORDER BY n DESC;",
    "<!DOCTYPE html>\n<html>\n  <body>\n    <div class=\"main\" id='x'>Hi &amp; bye</div>\n  </body>\n</html>",
    ".btn:hover { color: #ff00aa; margin: 0 auto; transition: all 0.3s ease-in-out; }",
    "{\"key\": \"value\", \"n\": 12345, \"arr\": [1, 2.5, null, true], \"nested\": {\"a\": {}}}",
    "version: '3'\nservices:\n  web:\n    image: nginx:1.25\n    ports:\n      - \"8080:80\"\n",
    "#!/usr/bin/env bash\nset -euo pipefail\nfor f in *.txt; do\n  echo \"$f\" | tr a-z A-Z >> out.log\ndone\n",
    "main :: IO ()\nmain = mapM_ print [x * y | x <- [1..3], y <- [4..6], odd (x + y)]",
    "\\begin{equation}\n  E = mc^2 \\quad \\int_0^\\infty e^{-x^2} dx = \\frac{\\sqrt{\\pi}}{2}\n\\end{equation}",
    "if (x != nullptr && *x >= 0x7FFF'FFFF) { y <<= 3; z = ~w & 0b1010; }",
    "x += 1; y -= 2; z *= 3; w /= 4; a %= 5; b **= 6; c //= 7; d |= e ^ f",
    "    \t  mixed indentation\n\t\t    more\n  \t",
    "// TODO(someone): fix this\n/* block\n   comment */\n#define MAX(a,b) ((a)>(b)?(a):(b))",
    "lambda x: [i for i in range(x) if i % 2 == 0 and i not in {3, 5}]",
    "assert response.status_code == 200, f\"unexpected {response.status_code!r}\"",
    "df.groupby('col').agg({'a': 'sum', 'b': ['mean', 'std']}).reset_index()",
    "err := json.Unmarshal(data, &cfg)\nif err != nil {\n\treturn nil, fmt.Errorf(\"parse: %w\", err)\n}",
]

CJK = [
    "我喜欢学习自然语言处理。", "今天天气很好，我们去公园散步吧！", "人工智能正在改变世界，大型语言模型尤其如此。",
    "北京、上海、广州和深圳是中国的一线城市。", "这是一个测试句子，包含标点符号：“引号”、《书名号》和（括号）。",
    "東京は日本の首都です。", "こんにちは、世界！ひらがなとカタカナとカンジ。", "私はプログラミングが好きです。ｶﾀｶﾅ",
    "吾輩は猫である。名前はまだ無い。", "안녕하세요, 세계! 저는 한국어를 공부하고 있습니다.", "대한민국의 수도는 서울입니다.",
    "한글 자모: ㄱㄴㄷㄹ ㅏㅑㅓㅕ", "龍龘靐齉 𠀀𠀁𪚥 𩸽", "中文English混合text测试123",
]

SCRIPTS = [
    "مرحبا بالعالم! كيف حالك اليوم؟", "اللُّغَةُ العَرَبِيَّةُ جَمِيلَةٌ", "١٢٣٤٥٦٧٨٩٠ و ۱۲۳۴", "فارسی زبان شیرینی است.",
    "שלום עולם! מה שלומך?", "בְּרֵאשִׁית בָּרָא אֱלֹהִים", "नमस्ते दुनिया! आप कैसे हैं?", "हिन्दी भाषा में क्षत्रिय और ज्ञान",
    "संस्कृतम् देववाणी", "০১২৩ বাংলা ভাষা", "தமிழ் மொழி அழகானது", "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
    "Привет, мир! Как дела?", "Ελληνικά: Γειά σου Κόσμε! ΣΊΣΥΦΟΣ σίσυφος", "Tiếng Việt có nhiều dấu: ở đây, người ta nói",
    "ქართული ენა", "Հայերեն լեզու", "አማርኛ ቋንቋ", "ᚠᚢᚦᚨᚱᚲ runes", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝐛𝐨𝐥𝐝",
    "İstanbul ıi İI", "Ǆemal ǅ ǆ ǈ", "ﬁne ﬂow ﬀ", "Ｆｕｌｌｗｉｄｔｈ　ｔｅｘｔ１２３",
]

EMOJI = [
    "😀", "😂🤣", "👍", "👍🏻", "👍🏽", "👍🏿", "👨‍👩‍👧‍👦", "👩‍💻", "🧑🏾‍🚀", "🏳️‍🌈", "🏴‍☠️", "❤️", "❤️‍🔥",
    "🇯🇵", "🇺🇸🇬🇧🇫🇷", "1️⃣", "#️⃣", "🙋‍♀️", "👁️‍🗨️", "🫠", "🦀", "🐍", "☕", "✨", "🎉🎊", "©️", "™",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "👩🏽‍❤️‍💋‍👨🏻", "🤌🏼", "⚽️", "🔥🔥🔥",
]

NFC_CHANGING = [
    "e\u0301", "cafe\u0301", "A\u030a", "\u212b", "\u2126", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af",
    "o\u0308\u0304", "n\u0303o", "\u00c5ngstr\u00f6m vs A\u030angstro\u0308m", "\u0041\u0308\u0301",
    "\u1e9b\u0323", "\u0344", "\u0958\u0959", "\u2adc", "\u0f73", "\u00e9\u0301", "s\u0323\u0307",
    "\u03d3", "\u1fed", "\u0374x\u037e", "\u30ab\u3099", "\uac00\u11a8",
]

COMBINING = [
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034da\u0309\u0300l\u0336g\u0335o\u0358",
    "a\u0300\u0301\u0302\u0303\u0304\u0305\u0306\u0307", "\u0301leading combining", "x\u20dd y\u20e3",
    "क\u094d\u200dष", "\u0627\u0644\u0644\u0651\u064e\u0647", "t\u0361s", "g\u0332", "\u05d1\u05bc\u05b0",
]

THINK = [
    "<think>\nLet me think about this step by step.\n</think>\n\nThe answer is 42.",
    "<think></think>", "<think>\n\n</think>\n\n", " <think> spaced </think> ", "<think>a</think>b<think>c</think>",
    "text<think>inner</think>text", "</think>\n\nAnswer only", "<think", "think>", "< think >", "<thinking>", "<think >",
    "<|im_start|>assistant\n<think>\nreasoning\n</think>\n\nfinal<|im_end|>",
]

WORDS = ("the of and to in is was for on that with as by at from it this be are or an have not "
         "but his they which one you were her all she there would their we him been has when who "
         "will more no if out so said what up its about into than them can only other new some "
         "could time these two may then do first any my now such like our over man me even most "
         "made after also did many before must through back years where much your way well down "
         "should because each just those people how too little state good very make world still "
         "own see men work long get here between both life being under never day same another "
         "know while last might us great old year off come since against go came right used take "
         "three tokenizer model decode encode draft verify kernel tensor cache batch").split()


def whitespace_run(rng):
    unit = rng.choice([" ", "\n", "\t", "\r\n", "  \n", "\n\n", " \t", "\u3000", "\u00a0"])
    return unit * rng.choice([1, 2, 3, 4, 5, 7, 8, 12, 16, 17, 31, 32, 33, 64, 100])


def digits(rng):
    n = rng.randint(1, 40)
    s = "".join(rng.choice("0123456789") for _ in range(n))
    form = rng.randrange(8)
    if form == 0:
        return s
    if form == 1:
        return f"{int(s):,}"
    if form == 2:
        return f"-{s}.{rng.randint(0, 99999)}"
    if form == 3:
        return " ".join(s[i:i + 3] for i in range(0, len(s), 3))
    if form == 4:
        return s.translate(str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩"))
    if form == 5:
        return s.translate(str.maketrans("0123456789", "０１２３４５６７８９"))
    if form == 6:
        return f"+1 ({s[:3]}) {s[3:6]}-{s[6:10]}"
    return f"v{s[:2]}.{s[2:4]}.{s[4:6]}"


def random_code_points(rng):
    out = []
    while len(out) < rng.randint(1, 12):
        block = rng.choice([(0x20, 0x7F), (0xA0, 0x2FF), (0x300, 0x36F), (0x370, 0x52F), (0x590, 0x6FF),
                            (0x900, 0xDFF), (0xE00, 0xEFF), (0x1100, 0x11FF), (0x1E00, 0x1FFF),
                            (0x2000, 0x2BFF), (0x3000, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3),
                            (0xE000, 0xE0FF), (0xF900, 0xFFFD), (0x10000, 0x1014F), (0x1D400, 0x1D7FF),
                            (0x1F300, 0x1FAFF), (0x20000, 0x2A6DF), (0x0, 0x1F)])
        cp = rng.randint(*block)
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if cat in ("Cn", "Cs"):  # unassigned in Python's Unicode 14 tables, or surrogates
            continue
        out.append(ch)
    return "".join(out)


def english_words(rng):
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 12))]
    if rng.random() < 0.3:
        words = [w.capitalize() if rng.random() < 0.3 else w.upper() if rng.random() < 0.1 else w for w in words]
    sep = rng.choice([" ", " ", " ", "  ", "\n", ", ", "-", "_", ""])
    return sep.join(words)


def code_slice(rng):
    snippet = rng.choice(CODE)
    lines = snippet.split("\n")
    start = rng.randrange(len(lines))
    return "\n".join(lines[start:start + rng.randint(1, 4)])


def long_word(rng):
    return rng.choice(["a", "ab", "xyz", "ha", "-", "=", "0", "中", "é", "🙂", "\u0301"]) * rng.randint(50, 180)


def invalid_utf8(rng):
    """Raw bytes with invalid UTF-8 pieces mixed into valid text."""
    bad = rng.choice([b"\xff", b"\xfe", b"\xc0\xaf", b"\xe0\x80\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                      b"\x80", b"\xbf\xbf", b"\xe4\xb8", b"\xf0\x9f\x98", b"\xc3", b"\xf8\x88\x80\x80\x80",
                      b"\xe2\x82", b"\xf0\x9f", b"\xc2\xc2\xa9", b"\xe4\xb8\xe4\xb8\xad", b"\x80\x81\x82"])
    parts = [english_words(rng).encode(), bad, rng.choice(CJK + EMOJI + [""]).encode()]
    if rng.random() < 0.5:
        parts.append(bad)
    rng.shuffle(parts)
    return b"".join(parts)


def generate(specials, count, seed):
    """Returns `count` corpus entries: str, or bytes for invalid-UTF-8 cases."""
    rng = random.Random(seed)
    fixed = ["", " ", "  ", "\n", "\n\n\n", "\t", "a", "A", "0", "00", "000", "0000", "é", "中", "😀", ".", "'",
             "'s", "'S", "'ll", "<", ">", "<<", "||", "<|", "|>", "Hello", " Hello", "Hello ", "hello world",
             "\r\n", " \n ", "1 2 3", "\u0085", "\u2028", "\ufeff", "\x00", "\U0010FFFD", "\U000E0001"]
    fixed += ENGLISH + CODE + CJK + SCRIPTS + EMOJI + NFC_CHANGING + COMBINING + THINK
    fixed += ["".join(ch for ch in unicodedata.normalize("NFD", s)) for s in ENGLISH[25:27] + SCRIPTS[14:16]]
    for special in specials:
        fixed += [special, special + special, " " + special + " ", "x" + special + "y", "\n" + special + "\n",
                  special[:-1], special.upper() if special.upper() != special else special + "x"]
    for n in range(1, 41):
        fixed.append("7" * n)
        fixed.append("1234567890"[: n % 10 + 1] * (n // 10 + 1))
    for n in [1, 2, 3, 5, 8, 16, 33, 64, 129]:
        fixed.append(" " * n)
        fixed.append("\n" * n)
        fixed.append("word" + " " * n + "word")
        fixed.append("x" + "\n" * n + "  y")
    generators = [
        lambda: rng.choice(ENGLISH), lambda: english_words(rng), lambda: code_slice(rng), lambda: rng.choice(CODE),
        lambda: rng.choice(CJK), lambda: rng.choice(SCRIPTS), lambda: "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4))),
        lambda: rng.choice(NFC_CHANGING), lambda: rng.choice(COMBINING), lambda: whitespace_run(rng),
        lambda: digits(rng), lambda: rng.choice(THINK), lambda: random_code_points(rng), lambda: long_word(rng),
    ]
    if specials:
        generators.append(lambda: rng.choice(specials))
        generators.append(lambda: rng.choice(specials))
    entries = list(fixed)
    seen = set(e for e in entries)
    while len(entries) < count:
        if rng.random() < 0.03:
            entry = invalid_utf8(rng)
        else:
            parts = [rng.choice(generators)() for _ in range(rng.randint(1, 4))]
            seps = [rng.choice(["", " ", " ", "\n", "\n\n", "\t", "  ", ". "]) for _ in parts]
            entry = "".join(p + s for p, s in zip(parts, seps))[:400]
            if len(entry) > 1 and unicodedata.category(entry[-1]) == "Cs":
                continue
        if entry in seen:
            continue
        seen.add(entry)
        entries.append(entry)
    return entries


def bench_text(limit_bytes=2_000_000):
    """Mixed English and code for the encode benchmark: Python standard-library modules
    (code, comments and docstrings), in name order, up to `limit_bytes`."""
    import sysconfig
    from pathlib import Path

    lib = Path(sysconfig.get_paths()["stdlib"])
    parts, total = [], 0
    for path in sorted(lib.glob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        parts.append(text)
        total += len(text.encode())
        if total >= limit_bytes:
            break
    return "".join(parts)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--bench-text"]:
        sys.stdout.write(bench_text())
    else:
        print("usage: corpus.py --bench-text   (writes the benchmark input to stdout)")
