"""Source-text analysis: completeness, IPython's leading-indent removal, the
trailing `;`, and the statement splitter behind streamed execution.

What a plain cell needs (dedent_cell, ends_with_semicolon) imports nothing;
re, tokenize, ast and codeop are imported by streamed executions and by cells
whose `;` needs a tokenizer to tell.
"""

CONTINUATION_WORDS = frozenset(("else", "elif", "except", "finally"))
# The first words of compound statements: what a later line may still continue (a decorator too).
COMPOUND_WORDS = frozenset(("if", "for", "while", "try", "with", "def", "class", "async"))
# Compound statements by AST node: `match` is only a soft keyword, so its word alone says nothing.
_COMPOUND_NODES = frozenset(("If", "For", "AsyncFor", "While", "Try", "TryStar", "With", "AsyncWith",
                             "FunctionDef", "AsyncFunctionDef", "ClassDef", "Match"))
_PATTERNS = None  # (fence, word) regular expressions, compiled on first use


def _patterns():
    global _PATTERNS
    if _PATTERNS is None:
        import re
        _PATTERNS = (re.compile(r"^\s*```[\w+.-]*\s*$"), re.compile(r"\w+"))
    return _PATTERNS


def classify(source):
    """'complete' | 'incomplete' | 'invalid' for a block of statements."""
    import ast
    import warnings
    from codeop import PyCF_ALLOW_INCOMPLETE_INPUT, PyCF_DONT_IMPLY_DEDENT
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(source)
        return "complete"
    except (SyntaxError, ValueError):
        pass
    flags = PyCF_ALLOW_INCOMPLETE_INPUT | PyCF_DONT_IMPLY_DEDENT
    for candidate in (source, source + "\n"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compile(candidate, "<classify>", "exec", flags, dont_inherit=True)
            return "complete"
        except SyntaxError as exc:
            if "incomplete input" in str(exc):
                return "incomplete"
        except ValueError:
            return "invalid"
    return "invalid"


def ends_simple(source):
    """True if the source parses and its last top-level statement is a simple one (no block
    that a later line could continue)."""
    import ast
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            body = ast.parse(source).body
    except (SyntaxError, ValueError):
        return False
    return bool(body) and type(body[-1]).__name__ not in _COMPOUND_NODES


def has_code(source):
    """True if any line of the source is more than blank space or a comment."""
    return any(map(_is_code, source.split("\n")))


def _code_indent(line):
    """The leading spaces/tabs of a line of code; None for a blank or comment line."""
    if not _is_code(line):
        return None
    return line[:len(line) - len(line.lstrip(" \t"))]


def dedent_cell(source):
    """IPython's leading-indent cleanup, so copy-pasted indented code runs.

    The indentation of the first line of code (blank and comment lines before
    it are skipped) is removed from every line that starts with it; other lines
    are left alone, so indentation that is really wrong still fails. No line is
    added or removed: tracebacks keep the cell's line numbers. A cell whose first
    line of code is not indented, i.e. every cell Python could compile, is
    returned unchanged.
    """
    lines = source.split("\n")
    prefix = next((p for p in map(_code_indent, lines) if p is not None), "")
    if not prefix:
        return source
    n = len(prefix)
    return "\n".join(line[n:] if line.startswith(prefix) else line for line in lines)


def ends_with_semicolon(source):
    """True if the last meaningful token of the cell is ';' (IPython suppresses output)."""
    if ";" not in source:
        return False
    import io
    import tokenize
    last = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.COMMENT, tokenize.INDENT,
                            tokenize.DEDENT, tokenize.ENDMARKER):
                continue
            last = tok
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return source.rstrip().endswith(";")
    return last is not None and last.type == tokenize.OP and last.string == ";"


def is_fence(line):
    return bool(_patterns()[0].match(line))


def _is_code(line):
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


def _starts_statement(line, complete_line):
    """Could this column-0 line begin a new top-level statement?"""
    if not line or line[0] in " \t\r\n#":
        return False
    if line[0] == "`":
        return False  # maybe a markdown fence still arriving
    m = _patterns()[1].match(line)
    if m is None:
        return True
    if m.end() == len(line.rstrip("\r\n")) and not complete_line:
        return False  # the first word may still grow ("el" -> "else")
    return m.group(0) not in CONTINUATION_WORDS


class StatementSplitter:
    """Cuts streamed code into top-level statements as soon as they are complete.

    A simple statement is complete at the end of its line when the text up to
    there parses (no open bracket, backslash or triple-quoted string): nothing
    can continue it. A compound statement (or a decorated one) is complete when
    a later line starts at column 0, is not a continuation
    (else/elif/except/finally), and the text before it parses.
    Markdown fence lines are dropped. Line numbers refer to the fence-free text.
    As in dedent_cell, the indentation of the first line of code (known once
    that line is complete) is removed from it and from every later line that
    starts with it, so uniformly indented code also runs statement by statement.
    """

    def __init__(self):
        self._lines = []      # complete, not yet handed out
        self._partial = ""    # the incomplete last line
        self._indent = None   # indentation of the first line of code (None: none yet)
        self._unchecked = False  # lines arrived (or were left by a cut) that ends_simple has not seen
        self.text = ""        # all fence-free, dedented text seen (for tracebacks)
        self.next_lineno = 1  # line number of the first pending line

    def feed(self, text):
        data = self._partial + text
        parts = data.split("\n")
        self._partial = parts.pop()
        for line in parts:
            self._add(line + "\n")

    def _add(self, line):
        if is_fence(line):
            return
        if self._indent is None:
            self._indent = _code_indent(line)
        line = self._dedent(line)
        self._lines.append(line)
        self._unchecked = True
        self.text += line

    def _dedent(self, line):
        if self._indent and line.startswith(self._indent):
            return line[len(self._indent):]
        return line

    def take_ready(self):
        """Returns (source, first_lineno) of the longest runnable prefix, or None.

        An invalid prefix with no runnable statement before it is returned too,
        so that running it reports the SyntaxError without waiting for the end.
        """
        lines = self._lines
        if self._ends_simple():
            return self._cut(len(lines))
        candidates = []
        seen_code = False
        for i, line in enumerate(lines):
            if seen_code and _starts_statement(line, True):
                candidates.append(i)
            seen_code = seen_code or _is_code(line)
        if seen_code and _starts_statement(self._dedent(self._partial), False):
            candidates.append(len(lines))
        invalid_at = None
        for i in reversed(candidates):
            status = classify("".join(lines[:i]))
            if status == "complete":
                return self._cut(i)
            if status == "invalid":
                invalid_at = i
        if invalid_at is not None:
            return self._cut(invalid_at)
        return None

    def _ends_simple(self):
        """Whether the pending lines end with a complete simple statement (parsed once per new line)."""
        if not self._unchecked:
            return False
        self._unchecked = False
        first = next((line for line in self._lines if _is_code(line)), None)
        if first is None or first[0] in " \t":
            return False  # an indented first line is an error the column-0 rule reports
        word = _patterns()[1].match(first)
        if first[0] == "@" or (word is not None and word.group(0) in COMPOUND_WORDS):
            return False  # a compound statement first: cut at the next column-0 line, then see again
        if self._lines[-1].rstrip().endswith(("(", "[", "{", "\\")):
            return False  # a bracket opened or a line continued: not parsed line by line
        return ends_simple("".join(self._lines))

    def _cut(self, i):
        source = "".join(self._lines[:i])
        first = self.next_lineno
        del self._lines[:i]
        self.next_lineno += i
        self._unchecked = bool(self._lines)
        return source, first

    def finish(self):
        """Everything not yet handed out, as (source, first_lineno)."""
        if self._partial:
            line, self._partial = self._partial, ""
            self._add(line)
        return self._cut(len(self._lines))
