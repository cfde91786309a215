"""The binary under test run as a command, and git in a tree."""
import subprocess

from pylib.paths import BIN


def run(*args, stdin=None, cwd=None, env=None, timeout=120, text=True, user=None, binary=BIN):
    """`shmguard ARGS` (or `binary`): the CompletedProcess, output captured (str, or bytes with
    text=False). `user`: run as that user (setpriv, groups cleared, group nogroup)."""
    cmd = [binary, *args]
    if user:
        cmd = ["setpriv", "--reuid", user, "--regid", "nogroup", "--clear-groups", *cmd]
    return subprocess.run(cmd, input=stdin, capture_output=True, text=text, timeout=timeout, cwd=cwd, env=env)


def git(tree, *args):
    """`git -C tree ARGS`'s stdout; a failure raises."""
    return subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True, check=True).stdout
