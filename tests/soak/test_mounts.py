"""The soak's tmpfs faults on a real tmpfs (root only): a fill reaches ENOSPC and its removal
frees the space; a read-only remount makes writes fail with EROFS and is undone; a remount
refused because a file is open for writing is an OSError the injector can note."""

import errno
import os

import pytest

from soak.mounts import FILLER, MountError, Mounts, why_not_mountable


@pytest.fixture
def mounts(tmp_path):
    why = why_not_mountable(tmp_path / "probe")
    if why is not None:
        pytest.skip(f"tmpfs mounts not permitted here: {why}")
    made = Mounts()
    made.make(tmp_path / "m", 2)
    yield made, tmp_path / "m"
    made.unmount_all()


def test_a_fill_reaches_enospc_and_freeing_it_gives_the_space_back(mounts):
    m, directory = mounts
    assert m.fill(directory) > 1_000_000
    with pytest.raises(OSError) as full:
        (directory / "task.json").write_bytes(b"x" * 65536)
    assert full.value.errno == errno.ENOSPC
    m.free(directory)
    assert not (directory / FILLER).exists()
    (directory / "task.json").write_bytes(b"x" * 65536)


def test_read_only_then_read_write(mounts):
    m, directory = mounts
    assert m.read_only(directory) == 1
    with pytest.raises(OSError) as refused:
        (directory / "line").write_text("x")
    assert refused.value.errno == errno.EROFS
    m.read_write(directory)
    (directory / "line").write_text("x")


def test_a_remount_refused_while_a_file_is_open_for_writing_is_an_oserror(mounts):
    m, directory = mounts
    fd = os.open(directory / "day.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        with pytest.raises(MountError, match="busy") as busy:
            m.read_only(directory, tries=2)
        assert isinstance(busy.value, OSError)
        os.write(fd, b"still writable\n")
    finally:
        os.close(fd)


def test_an_ext4_error_makes_the_logs_disk_read_only_under_an_open_file_until_mounted_again(
    tmp_path,
):
    why = why_not_mountable(tmp_path / "probe")
    if why is not None:
        pytest.skip(f"mounts not permitted here: {why}")
    m, directory = Mounts(), tmp_path / "logs"
    try:
        m.make_ext4(directory, 8, tmp_path / "logs.img")
    except OSError as exc:
        pytest.skip(f"no ext4 image on a loop device here: {exc}")
    try:
        fd = os.open(directory / "day.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, b"before\n")
        os.fsync(fd)
        m.fail(directory)  # what a busy remount cannot do: the open file is refused too
        with pytest.raises(OSError) as refused:
            os.write(fd, b"during\n")
        assert refused.value.errno == errno.EROFS
        m.mount_again(directory)
        os.close(fd)
        with open(directory / "day.jsonl", "ab") as again:
            again.write(b"after\n")
        assert (directory / "day.jsonl").read_bytes() == b"before\nafter\n"
    finally:
        m.unmount_all()
