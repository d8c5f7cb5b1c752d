"""The seccomp filter every sandboxed command runs under (bwrap ``--seccomp FD``).

Defence in depth beside the namespaces: the calls below are where kernel escapes and snooping
start, and no web project needs them. They fail with EPERM (a program that probes them carries on);
everything else is allowed. The filter is built by libseccomp (through ``pyseccomp``) for this
machine's own architecture, x86_64 or aarch64 alike: its first instructions check the calling
architecture, and a call made through another ABI (32-bit ``int 0x80`` on x86_64) kills the caller
rather than slip past a table written for the native one.

``clone``/``clone3`` stay allowed: glibc needs them for threads (new namespaces are stopped by
``--disable-userns`` and the dropped capabilities instead).
"""

from __future__ import annotations

import errno
import functools
import io
import os

DENIED_CALLS = (
    # debugging and reading other processes' memory
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    # filesystems and namespaces
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
    "open_by_handle_at",
    "name_to_handle_at",
    "quotactl",
    # the kernel's keyrings, BPF, perf, userfaultfd: frequent sources of privilege escalations
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    # the machine itself
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "syslog",
    "iopl",
    "ioperm",
    "uselib",
)


def seccomp_problem() -> str | None:
    """Why the filter cannot be built here (one line), or None."""
    try:
        seccomp_program()
    except (ImportError, OSError, RuntimeError) as exc:
        return f"the seccomp filter cannot be built (libseccomp: {exc})"
    return None


@functools.cache
def seccomp_program() -> bytes:
    """The compiled BPF program (built once per process)."""
    import pyseccomp  # loads the system's libseccomp: only where a sandbox starts

    rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    for call in DENIED_CALLS:
        try:
            rules.add_rule(pyseccomp.ERRNO(errno.EPERM), call)
        except (RuntimeError, ValueError, OSError):  # a call this architecture does not have (iopl on aarch64)
            continue
    # export_bpf writes to a real file descriptor.
    read_end, write_end = os.pipe()
    try:
        with open(write_end, "wb", closefd=True) as sink:
            rules.export_bpf(sink)
        with open(read_end, "rb", closefd=False) as source:
            return source.read()
    finally:
        os.close(read_end)


def seccomp_fd() -> int:
    """A new file descriptor holding the program, at offset 0, for one bwrap (which reads it to the end)."""
    program = seccomp_program()
    fd = os.memfd_create("webgen-seccomp", os.MFD_CLOEXEC)
    try:
        with io.FileIO(fd, "wb", closefd=False) as sink:
            sink.write(program)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
