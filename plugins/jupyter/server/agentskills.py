"""bothy's agent skills: file helpers for an agent's IPython cells.

The Jupyter plugin of bothy's executor puts this module on the kernel's
path and runs ``from agentskills import *`` in every kernel it starts, as
OpenHands' runtime does with its agent_skills plugin. The functions and
their printed output follow OpenHands' file_ops (the same names,
arguments and text), so an agent's prompts and parsers work unchanged.
Standard library only.

Functions (each prints its result and returns None):
- open_file(path, line_number=1, context_lines=100)
- goto_line(line_number)
- scroll_down()
- scroll_up()
- create_file(filename)
- edit_file_by_replace(file_name, to_replace, new_content)
- insert_content_at_line(file_name, line_number, content)
- append_file(file_name, content)
- search_dir(search_term, dir_path='./')
- search_file(search_term, file_path=None)
- find_file(file_name, dir_path='./')

With ENABLE_AUTO_LINT=true in the kernel's environment, an edit of a
Python file that introduces a syntax error (checked with compile()) is
undone and the error shown, as OpenHands' auto lint does.
"""

import os
import re

__all__ = [
    'open_file',
    'goto_line',
    'scroll_down',
    'scroll_up',
    'create_file',
    'edit_file_by_replace',
    'insert_content_at_line',
    'append_file',
    'search_dir',
    'search_file',
    'find_file',
]

CURRENT_FILE = None
CURRENT_LINE = 1
WINDOW = 100

MSG_FILE_UPDATED = (
    '[File updated (edited at line {line_number}). Please review the changes and make sure '
    'they are correct (correct indentation, no duplicate lines, etc). Edit the file again if necessary.]'
)
LINTER_ERROR_MSG = (
    '[Your proposed edit has introduced new syntax error(s). Please understand the errors '
    'and retry your edit command.]\nERRORS:\n'
)
_NOT_APPLIED = (
    'Your changes have NOT been applied. Please fix your edit command and try again.\n'
    'You either need to 1) Open the correct file and try again or 2) Specify the correct line number arguments.\n'
    'DO NOT re-run the same failed edit command. Running it again will lead to the same error.'
)


class LineNumberError(Exception):
    """A line number outside the file."""


def _error(msg):
    print(f'ERROR: {msg}')


def _read_lines(path):
    with open(path, encoding='utf-8', errors='replace') as f:
        return f.read().splitlines(True)


def _count_lines(path):
    return max(1, len(_read_lines(path)))


def _window(path, line, window, from_line=False):
    """The numbered lines of path around line (or from it), with the
    markers above and below; moves CURRENT_LINE to line."""
    global CURRENT_LINE
    with open(path, encoding='utf-8', errors='replace') as f:
        text = f.read()
    if not text.endswith('\n'):
        text += '\n'
    lines = text.splitlines(True)
    total = len(lines)
    CURRENT_LINE = max(1, min(line, total))
    if from_line:
        start, end = CURRENT_LINE, min(total, CURRENT_LINE + window)
    else:
        half = max(1, window // 2)
        start, end = max(1, CURRENT_LINE - half), min(total, CURRENT_LINE + half)
    if start == 1:
        end = min(total, window)
    if end == total:
        start = max(1, end - window + 1)
    out = [f'({start - 1} more lines above)' if start > 1 else '(this is the beginning of the file)']
    out += [f'{i}|{lines[i - 1].rstrip(chr(10))}' for i in range(start, end + 1)]
    out.append(f'({total - end} more lines below)' if end < total else '(this is the end of the file)')
    return '\n'.join(out).rstrip()


def _header(path, total, after_edit=False):
    extra = ' after edit' if after_edit else ''
    return f'[File: {os.path.abspath(path)} ({total} lines total{extra})]\n'


def _current():
    if not CURRENT_FILE or not os.path.isfile(CURRENT_FILE):
        _error('No file open. Use the open_file function first.')
        return None
    return CURRENT_FILE


def open_file(path, line_number=1, context_lines=WINDOW):
    """Open the file at path and print up to context_lines (at most 100)
    of it, numbered, around line_number. Use scroll_down and scroll_up
    to see more, goto_line to move."""
    global CURRENT_FILE, CURRENT_LINE
    if not isinstance(path, str) or not os.path.isfile(path):
        _error(f'File {path} not found.')
        return
    total = _count_lines(path)
    if not isinstance(line_number, int) or isinstance(line_number, bool) or not 1 <= line_number <= total:
        _error(f'Line number must be between 1 and {total}')
        return
    CURRENT_FILE = os.path.abspath(path)
    CURRENT_LINE = line_number
    if not isinstance(context_lines, int) or context_lines < 1:
        context_lines = WINDOW
    out = _header(CURRENT_FILE, total) + _window(CURRENT_FILE, CURRENT_LINE, min(context_lines, 100))
    if out.endswith('more lines below)'):
        out += '\n[Use `scroll_down` to view the next 100 lines of the file!]'
    print(out)


def goto_line(line_number):
    """Move the open file's window to show line_number."""
    path = _current()
    if path is None:
        return
    total = _count_lines(path)
    if not isinstance(line_number, int) or isinstance(line_number, bool) or not 1 <= line_number <= total:
        _error(f'Line number must be between 1 and {total}.')
        return
    print(_header(path, total) + _window(path, line_number, WINDOW))


def _scroll(delta):
    path = _current()
    if path is None:
        return
    total = _count_lines(path)
    line = max(1, min(CURRENT_LINE + delta, total))
    print(_header(path, total) + _window(path, line, WINDOW, from_line=True))


def scroll_down():
    """Move the open file's window down by 100 lines."""
    _scroll(WINDOW)


def scroll_up():
    """Move the open file's window up by 100 lines."""
    _scroll(-WINDOW)


def create_file(filename):
    """Create filename (with one empty line) and open it; an existing file
    is left alone."""
    if os.path.exists(filename):
        _error(f"File '{filename}' already exists.")
        return
    parent = os.path.dirname(filename)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(filename, 'w', encoding='utf-8') as f:
        f.write('\n')
    open_file(filename)
    print(f'[File {filename} created.]')


def _syntax_error(path, text):
    """The first syntax error of text, the content of the Python file
    path, as (message, line); (None, None) if none or not Python."""
    if not path.endswith('.py'):
        return None, None
    try:
        compile(text, path, 'exec', dont_inherit=True)
    except SyntaxError as e:
        return f'{path}:{e.lineno or 1}:{e.offset or 1}: E999 {type(e).__name__}: {e.msg}', e.lineno or 1
    except ValueError as e:
        return f'{path}:1:1: E902 {e}', 1
    return None, None


def _edit(file_name, build):
    """Change file_name to what build(lines) answers (its new text, the
    number of lines added and the line to show), write it in one rename,
    and answer what to print."""
    global CURRENT_FILE, CURRENT_LINE
    failed = f'[Error editing file {file_name}. Please confirm the file is correct.]'
    if not isinstance(file_name, str) or not file_name.strip() or '\0' in file_name:
        _error('Invalid file name.')
        return None
    if not os.path.isfile(file_name):
        _error(f'File {file_name} not found.')
        return None
    lines = _read_lines(file_name)
    original = ''.join(lines)
    try:
        text, added, shown = build(lines)
    except LineNumberError as e:
        return f'{failed}\n{e}\n{_NOT_APPLIED}\n'
    if not text.endswith('\n'):
        text += '\n'

    lint = os.getenv('ENABLE_AUTO_LINT', 'false').lower() == 'true'
    before_err = _syntax_error(file_name, original)[0] if lint else None
    _write(file_name, text)
    if lint:
        err, err_line = _syntax_error(file_name, text)
        if err is not None and (before_err is None or before_err != err):
            show = err_line or shown
            sep = '-' * 49 + '\n'
            msg = LINTER_ERROR_MSG + err + '\n'
            msg += f'[This is how your edit would have looked if applied]\n{sep}'
            msg += _window(file_name, show, added + 20) + '\n' + sep + '\n'
            _write(file_name, original)
            msg += f'[This is the original code before your edit]\n{sep}'
            msg += _window(file_name, show, added + 20) + '\n' + sep
            msg += (
                'Your changes have NOT been applied. Please fix your edit command and try again.\n'
                'You either need to 1) Specify the correct start/end line arguments or 2) Correct your edit code.\n'
                'DO NOT re-run the same failed edit command. Running it again will lead to the same error.'
            )
            return msg
    total = _count_lines(file_name)
    CURRENT_LINE = max(1, min(shown, total))
    CURRENT_FILE = os.path.abspath(file_name)
    msg = _header(file_name, total, after_edit=True)
    msg += _window(CURRENT_FILE, CURRENT_LINE, WINDOW) + '\n'
    return msg + MSG_FILE_UPDATED.format(line_number=CURRENT_LINE)


def _write(path, text):
    """Write text to path through a new file in its directory renamed over
    it, keeping its mode."""
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, f'.{os.path.basename(path)}.{os.getpid()}.tmp')
    mode = os.stat(path).st_mode & 0o7777
    try:
        with open(tmp, 'w', encoding='utf-8') as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def edit_file_by_replace(file_name, to_replace, new_content):
    """Replace the one occurrence of to_replace in file_name with
    new_content. to_replace must match the file exactly (whitespace other
    than newlines is ignored when no exact match exists) and only once;
    an empty new_content removes it."""
    if to_replace is None or not isinstance(to_replace, str) or to_replace.strip() == '':
        _error('`to_replace` must not be empty.')
        return
    if to_replace == new_content:
        _error('`to_replace` and `new_content` must be different.')
        return
    if not os.path.isfile(file_name):
        _error(f'File {file_name} not found.')
        return
    new_content = str(new_content or '')
    with open(file_name, encoding='utf-8', errors='replace') as f:
        text = f.read()
    if text.count(to_replace) > 1:
        _error('`to_replace` appears more than once, please include enough lines to make code in `to_replace` unique.')
        return
    at, exact = text.find(to_replace), True
    if at == -1:
        exact = False
        squeeze = lambda s: re.sub(r'[^\S\n]+', '', s)  # noqa: E731
        text, at = squeeze(text), squeeze(text).find(squeeze(to_replace))
        if at == -1:
            print(f'[No exact match found in {file_name} for\n```\n{to_replace}\n```\n]')
            return
    start = text[:at].count('\n') + 1
    if exact:
        # The match alone is replaced: the rest of its first and last
        # lines stays.
        def build(lines):
            return text[:at] + new_content + text[at + len(to_replace) :], len(new_content.splitlines()), start
    else:
        # Without spaces the match is found by line: its lines are
        # replaced.
        end = start + len(to_replace.splitlines()) - 1

        def build(lines):
            body = new_content if new_content.endswith('\n') or not new_content else new_content + '\n'
            return ''.join(lines[: start - 1]) + body + ''.join(lines[end:]), len(body.splitlines()), start

    out = _edit(file_name, build)
    if out is not None:
        print(out)


def _empty(lines):
    return not lines or (len(lines) == 1 and lines[0].strip() == '')


def insert_content_at_line(file_name, line_number, content):
    """Insert content before line line_number (from 1) of file_name; the
    other lines are unchanged."""

    def build(lines):
        content_ = str(content or '')
        block = content_ if content_.endswith('\n') else content_ + '\n'
        if _empty(lines):
            return block, len(block.splitlines()), 1
        if not isinstance(line_number, int) or isinstance(line_number, bool) or not 1 <= line_number <= len(lines) + 1:
            raise LineNumberError(
                f'Invalid line number: {line_number}. Line numbers must be between 1 and {len(lines)} (inclusive).'
            )
        text = ''.join(lines[: line_number - 1]) + block + ''.join(lines[line_number - 1 :])
        return text, len(block.splitlines()), line_number

    out = _edit(file_name, build)
    if out is not None:
        print(out)


def append_file(file_name, content):
    """Append content to the end of file_name."""

    def build(lines):
        content_ = str(content or '')
        if _empty(lines):
            return content_, len(content_.splitlines()), 1
        head = ''.join(lines)
        if not head.endswith('\n'):
            head += '\n'
        return head + content_, len(content_.splitlines()), len(lines)

    out = _edit(file_name, build)
    if out is not None:
        print(out)


def search_dir(search_term, dir_path='./'):
    """Print each line of the files under dir_path (hidden files skipped)
    that contains search_term."""
    if not os.path.isdir(dir_path):
        _error(f'Directory {dir_path} not found')
        return
    matches = []
    for root, _, files in os.walk(dir_path):
        for name in files:
            if name.startswith('.'):
                continue
            path = os.path.join(root, name)
            try:
                with open(path, encoding='utf-8', errors='ignore') as f:
                    for n, line in enumerate(f, 1):
                        if search_term in line:
                            matches.append((path, n, line.strip()))
            except OSError:
                continue
    if not matches:
        print(f'No matches found for "{search_term}" in {dir_path}')
        return
    files = len({m[0] for m in matches})
    if files > 100:
        print(f'More than {files} files matched for "{search_term}" in {dir_path}. Please narrow your search.')
        return
    print(f'[Found {len(matches)} matches for "{search_term}" in {dir_path}]')
    for path, n, line in matches:
        print(f'{path} (Line {n}): {line}')
    print(f'[End of matches for "{search_term}" in {dir_path}]')


def search_file(search_term, file_path=None):
    """Print each line of file_path (the open file by default) that
    contains search_term."""
    if file_path is None:
        file_path = CURRENT_FILE
    if file_path is None:
        _error('No file specified or open. Use the open_file function first.')
        return
    if not os.path.isfile(file_path):
        _error(f'File {file_path} not found.')
        return
    with open(file_path, encoding='utf-8', errors='replace') as f:
        matches = [(n, line.strip()) for n, line in enumerate(f, 1) if search_term in line]
    if not matches:
        print(f'[No matches found for "{search_term}" in {file_path}]')
        return
    print(f'[Found {len(matches)} matches for "{search_term}" in {file_path}]')
    for n, line in matches:
        print(f'Line {n}: {line}')
    print(f'[End of matches for "{search_term}" in {file_path}]')


def find_file(file_name, dir_path='./'):
    """Print the files under dir_path whose name contains file_name."""
    if not os.path.isdir(dir_path):
        _error(f'Directory {dir_path} not found')
        return
    matches = [os.path.join(root, f) for root, _, files in os.walk(dir_path) for f in files if file_name in f]
    if not matches:
        print(f'[No matches found for "{file_name}" in {dir_path}]')
        return
    print(f'[Found {len(matches)} matches for "{file_name}" in {dir_path}]')
    for m in matches:
        print(m)
    print(f'[End of matches for "{file_name}" in {dir_path}]')
