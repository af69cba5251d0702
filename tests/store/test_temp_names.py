"""Temp file names: one random prefix per process and a counter. A forked child (a gunicorn
worker, a multiprocessing consumer) must not go on with its parent's prefix and counter, or
the two would pick the same next name in one directory."""

from __future__ import annotations

import os

from queues.store import files


def test_names_in_one_process_never_repeat_and_are_never_task_files():
    names = [files.temp_name() for _ in range(1000)]
    assert len(set(names)) == len(names)
    assert all(n.startswith(files.TEMP_PREFIX) and not n.endswith(".json") for n in names)


def test_a_forked_child_picks_names_of_its_own():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next name, and nothing else
        try:
            os.write(write, files.temp_name().encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        child_name = os.read(read, 200).decode()
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    parent_name = files.temp_name()
    assert child_name and child_name != parent_name
    assert child_name.rsplit("-", 1)[0] != parent_name.rsplit("-", 1)[0]  # another prefix


def test_a_written_temp_file_has_such_a_name(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        name = files.write_temp(fd, b"{}", fsync=False)
    finally:
        os.close(fd)
    assert name.startswith(files.TEMP_PREFIX)
    assert (tmp_path / name).read_bytes() == b"{}"


def test_a_forked_child_never_posts_an_id_its_parent_drew(tmp_path):
    """Task ids are read from the random source many at a time: a child forked with some
    left in the pool draws its own instead of handing out the parent's next ones."""
    from queues.store import ids

    ids.new_task_id()  # the pool holds more ids now
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent, then out
        os.write(writer, "".join(ids.new_task_id() for _ in range(5)).encode())
        os._exit(0)
    os.close(writer)
    os.waitpid(pid, 0)
    child = os.read(reader, 1000).decode()
    os.close(reader)
    parent = "".join(ids.new_task_id() for _ in range(5))
    assert len(child) == len(parent) == 80 and child != parent
    assert (
        len(
            {child[i : i + 16] for i in range(0, 80, 16)}
            | {parent[i : i + 16] for i in range(0, 80, 16)}
        )
        == 10
    )
