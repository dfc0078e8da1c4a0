"""Files: read, write, stat, list, move, remove; directories as tar; the editor."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile

import pytest

from bothy import (
    BadRequestError,
    ConflictError,
    NotFoundError,
    Sandbox,
    ToolError,
    UnsafeArchiveError,
)
from bothy._transfer import SafeExtractor


def test_files(sb: Sandbox) -> None:
    fs = sb.files
    fi = fs.write("/work/dir/a.txt", "line 1\nline 2\nline 3\n", mode=0o600)
    assert fi.path == "/work/dir/a.txt" and fi.is_file and fi.size == 21 and fi.mode == 0o600
    c = fs.read("/work/dir/a.txt", start=2, end=3)
    assert (c.kind, c.content, c.start, c.end) == ("text", "line 2\nline 3\n", 2, 3)
    assert fs.read_text("/work/dir/a.txt").count("\n") == 3
    blob = bytes(range(256)) * 4096
    fs.write("/work/blob", io.BytesIO(blob))  # a file object: streamed
    assert fs.read_bytes("/work/blob") == blob and fs.read("/work/blob").kind == "binary"
    fs.write("/work/dir/a.txt", b"line 4\n", append=True)
    assert fs.read_text("/work/dir/a.txt").endswith("line 3\nline 4\n")
    with pytest.raises(ConflictError):
        fs.write("/work/dir/a.txt", "x", exclusive=True)
    assert fs.stat("/work/dir").is_dir and fs.exists("/work/blob") and not fs.exists("/work/nope")

    sb.run("ln -s dir/a.txt /work/link")
    assert fs.stat("/work/link").is_symlink and fs.stat("/work/link").link_target == "dir/a.txt"
    assert fs.stat("/work/link", follow=True).is_file
    names = [e.name for e in fs.list("/work", recursive=True)]
    assert names == ["blob", "dir", "dir/a.txt", "link"]
    assert [e.name for e in fs.list("/work")] == ["blob", "dir", "link"]

    moved = fs.move("/work/blob", "/work/dir/blob")
    assert moved.path == "/work/dir/blob"
    with pytest.raises(ConflictError):
        fs.move("/work/dir/blob", "/work/dir/a.txt")
    with pytest.raises(ConflictError):
        fs.remove("/work/dir")
    fs.remove("/work/dir", recursive=True)
    assert [e.name for e in fs.list("/work")] == ["link"]

    with pytest.raises(NotFoundError) as e:
        fs.read("/work/missing")
    assert (e.value.code, e.value.status) == ("not_found", 404) and "/work/missing" in e.value.message
    with pytest.raises(BadRequestError):
        fs.stat("relative/path")
    with pytest.raises(IsADirectoryError):
        fs.read_bytes("/work")


def test_upload_download_directories(sb: Sandbox, tmpdir_short: str) -> None:
    """Directories travel as tar both ways, with docker cp's rules; a
    download never writes through a symlink on the host and leaves out
    symlinks that lead out of the directory."""
    src = os.path.join(tmpdir_short, "proj")
    os.makedirs(os.path.join(src, "pkg", "empty"))
    with open(os.path.join(src, "main.py"), "w") as f:
        f.write("print(1)\n")
    with open(os.path.join(src, "pkg", "run.sh"), "w") as f:
        f.write("#!/bin/sh\necho run\n")
    os.chmod(os.path.join(src, "pkg", "run.sh"), 0o755)
    os.symlink("../main.py", os.path.join(src, "pkg", "main-link"))
    big = os.urandom(3 << 20)
    with open(os.path.join(src, "big.bin"), "wb") as f:
        f.write(big)

    res = sb.files.upload(src, "/work")  # /work does not exist: the directory becomes /work
    assert res.dir and res.dst == "/work" and res.files == 3 and res.symlinks == 1 and res.dirs >= 2
    res = sb.files.upload(src, "/work")  # now it does: into it, as /work/proj
    assert res.dst == "/work/proj"
    res = sb.files.upload(src + "/.", "/contents")  # "/." copies the contents
    assert res.dst == "/contents"
    r = sb.run("cd /work && sh pkg/run.sh && cat pkg/main-link && stat -c %a pkg/run.sh && ls -A /work/proj /contents"
               " && sha256sum big.bin")
    words = r.stdout.split()
    assert words[:3] == ["run", "print(1)", "755"], r
    assert words[3:12] == ["/contents:", "big.bin", "main.py", "pkg", "/work/proj:", "big.bin", "main.py", "pkg",
                           hashlib.sha256(big).hexdigest()], r
    fres = sb.files.upload(os.path.join(src, "main.py"), "/work/pkg/")
    assert fres.dst == "/work/pkg/main.py" and fres.bytes == 9
    with pytest.raises(FileNotFoundError):
        sb.files.upload(os.path.join(src, "main.py"), "/nowhere/")

    # Out again, with traps: links that lead out of the directory.
    sb.run("cd /work && ln -s /etc/passwd abs-link && ln -s ../../etc/shadow up-link && ln -s pkg inner-link")
    out = os.path.join(tmpdir_short, "out")
    res = sb.files.download("/work", out)
    assert res.dir and res.dst == out and res.skipped == 2 and res.symlinks == 3, res  # main-link twice, inner-link
    assert open(os.path.join(out, "pkg", "main-link")).read() == "print(1)\n"
    assert os.readlink(os.path.join(out, "inner-link")) == "pkg"
    assert not os.path.lexists(os.path.join(out, "abs-link")) and not os.path.lexists(os.path.join(out, "up-link"))
    assert os.stat(os.path.join(out, "pkg", "run.sh")).st_mode & 0o777 == 0o755
    with open(os.path.join(out, "big.bin"), "rb") as f:
        assert f.read() == big

    # The host directory already holds symlinks where the archive has a
    # file and a directory: they are replaced, never written through.
    victim_dir = os.path.join(tmpdir_short, "victim")
    os.mkdir(victim_dir)
    victim = os.path.join(victim_dir, "file")
    with open(victim, "w") as f:
        f.write("untouched")
    dest = os.path.join(tmpdir_short, "dest")
    os.mkdir(dest)
    os.symlink(victim, os.path.join(dest, "main.py"))
    os.symlink(victim_dir, os.path.join(dest, "pkg"))
    sb.files.download("/work/.", dest)
    assert open(victim).read() == "untouched" and os.listdir(victim_dir) == ["file"]
    assert not os.path.islink(os.path.join(dest, "pkg")) and os.path.isfile(os.path.join(dest, "pkg", "run.sh"))
    assert open(os.path.join(dest, "main.py")).read() == "print(1)\n"

    # A file: to the path, or into an existing directory.
    res = sb.files.download("/work/main.py", os.path.join(tmpdir_short, "m.py"))
    assert res.bytes == 9 and open(res.dst).read() == "print(1)\n"
    res = sb.files.download("/work/pkg/run.sh", out)
    assert res.dst == os.path.join(out, "run.sh") and os.stat(res.dst).st_mode & 0o777 == 0o755

    # Archives by hand.
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        data = b"from a tar\n"
        ti = tarfile.TarInfo("t/x.txt")
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    ups = sb.files.upload_archive("/arch", buf.getvalue())
    assert ups[0].archive and ups[0].archive["files"] == 1
    assert sb.files.read_text("/arch/t/x.txt") == "from a tar\n"
    z = io.BytesIO()
    assert sb.files.download_archive("/arch", z, format="zip") > 0 and z.getvalue()[:2] == b"PK"


def _tar(*entries: tarfile.TarInfo, data: bytes = b"x") -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for ti in entries:
            if ti.isreg():
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
            else:
                tf.addfile(ti)
    buf.seek(0)
    return buf


def _entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", mode: int = 0o644) -> tarfile.TarInfo:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    ti.linkname = link
    ti.mode = mode
    return ti


@pytest.mark.parametrize(
    "entries, why",
    [
        ([_entry("../evil")], "'..' in path"),
        ([_entry("a/../../evil")], "'..' in path"),
        ([_entry("/etc/evil")], "absolute path"),
        ([_entry("dev", tarfile.CHRTYPE)], "device nodes"),
        ([_entry("fifo", tarfile.FIFOTYPE)], "device nodes, FIFOs"),
        ([_entry("h", tarfile.LNKTYPE, "../outside")], "'..' in path"),
        ([_entry("l", tarfile.SYMTYPE, "x"), _entry("h", tarfile.LNKTYPE, "l")], "not an extracted file"),
        ([_entry(".", tarfile.REGTYPE)], "only a directory"),
    ],
)
def test_extractor_refuses(tmpdir_short: str, entries: list, why: str) -> None:
    """What a sandbox could put in an archive to reach outside the
    destination is refused, and nothing lands outside it."""
    dest = os.path.join(tmpdir_short, "d")
    with SafeExtractor(dest) as x:
        with pytest.raises(UnsafeArchiveError) as e:
            x.extract(_tar(*entries))
    assert why in str(e.value)
    assert sorted(os.listdir(tmpdir_short)) == ["d"]


def test_extractor_never_follows_symlinks(tmpdir_short: str) -> None:
    """A symlink made by the archive itself (inside the destination, so
    kept) is replaced, not followed, by a later entry below it or at it;
    setuid bits are dropped; escaping symlinks are skipped."""
    dest = os.path.join(tmpdir_short, "d")
    outside = os.path.join(tmpdir_short, "outside")
    os.mkdir(outside)
    tar = _tar(
        _entry("sub", tarfile.DIRTYPE, mode=0o755),
        _entry("in", tarfile.SYMTYPE, "sub"),
        _entry("in/f"),  # below a symlink: the symlink is replaced by a directory
        _entry("esc", tarfile.SYMTYPE, "../outside"),  # skipped
        _entry("abs", tarfile.SYMTYPE, outside),  # skipped
        _entry("esc/f"),  # a directory, not the outside one
        _entry("suid", mode=0o4755),
        _entry("sub/l", tarfile.SYMTYPE, "../suid"),  # kept: inside
        _entry("sub/l"),  # a file at a symlink: replaces it
        _entry("hard", tarfile.LNKTYPE, "suid"),
    )
    with SafeExtractor(dest) as x:
        x.extract(tar)
        counts = x.counts()
    assert os.listdir(outside) == []
    assert os.path.isdir(os.path.join(dest, "in")) and not os.path.islink(os.path.join(dest, "in"))
    assert os.path.isdir(os.path.join(dest, "esc")) and not os.path.lexists(os.path.join(dest, "abs"))
    assert os.stat(os.path.join(dest, "suid")).st_mode & 0o7777 == 0o755
    assert os.path.isfile(os.path.join(dest, "sub", "l")) and not os.path.islink(os.path.join(dest, "sub", "l"))
    assert os.stat(os.path.join(dest, "hard")).st_ino == os.stat(os.path.join(dest, "suid")).st_ino
    assert counts["skipped"] == 2


def test_editor(sb: Sandbox) -> None:
    ed = sb.editor
    r = ed.create("/src/app.py", "print('hello')\n")
    assert not r.prev_exist and "File created successfully" in r.output
    r = ed.str_replace("/src/app.py", "hello", "bothy")
    assert "has been edited" in r.output and r.diff and "+print('bothy')" in r.diff
    assert sb.run("python3 /src/app.py").stdout == "bothy\n"
    r = ed.insert("/src/app.py", 1, "print(2)")
    assert sb.run("python3 /src/app.py").stdout == "bothy\n2\n"
    r = ed.view("/src/app.py", view_range=[2, 2])
    assert "print(2)" in r.output and "bothy" not in r.output
    ed.undo_edit("/src/app.py")
    assert sb.files.read_text("/src/app.py") == "print('bothy')\n"
    with pytest.raises(ToolError) as e:
        ed.str_replace("/src/app.py", "nothere", "x")
    assert e.value.code == "tool_error" and "did not appear verbatim" in e.value.message
    with pytest.raises(ToolError):
        ed.create("/src/app.py", "again")
