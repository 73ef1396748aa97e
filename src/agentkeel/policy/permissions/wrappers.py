"""Wrappers: programs that run another program named in their arguments (``timeout 5 git
status`` runs ``git status``), and the shells whose ``-c`` script keel reads as a command line.

A wrapper is stripped only when its option syntax is modelled exactly (:data:`WRAPPER_OPTS_WITH_VALUE`
and :data:`WRAPPER_FLAGS`); an option keel does not know (an abbreviation, a newer flag) leaves
the program it runs unknown. Programs in :data:`RUNNERS` run a command named in their arguments
with an option syntax keel does not model: the command is kept as written, and every word
sequence in it that could be the program they run is checked against deny and ask rules."""

from __future__ import annotations

from agentkeel.policy.permissions.words import DYNAMIC

# wrappers stripped before matching: ``timeout 5 git status`` is checked as ``git status``
WRAPPER_OPTS_WITH_VALUE: dict[str, frozenset[str]] = {
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "xargs": frozenset(
        {
            "-n",
            "-L",
            "-I",
            "-d",
            "-P",
            "-s",
            "-E",
            "-a",
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-lines",
            "--max-procs",
            "--max-chars",
            "--process-slot-var",
        }
    ),
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-a", "--argv0"}),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "noglob": frozenset(),
    "nohup": frozenset(),
    "exec": frozenset({"-a"}),
    "setsid": frozenset(),
    "coproc": frozenset(),
    "busybox": frozenset(),
}
# options that take no value (or only one attached: ``-i{}``, ``--replace=R``)
WRAPPER_FLAGS: dict[str, frozenset[str]] = {
    "timeout": frozenset({"--foreground", "-v", "--verbose", "-p", "--preserve-status", "-f"}),
    "nice": frozenset(),
    "stdbuf": frozenset(),
    "xargs": frozenset(
        {
            "-0",
            "--null",
            "-p",
            "--interactive",
            "-r",
            "--no-run-if-empty",
            "-t",
            "--verbose",
            "-x",
            "--exit",
            "-o",
            "--open-tty",
            "-e",
            "-i",
            "-l",
            "--replace",
            "--eof",
        }
    ),
    "env": frozenset({"-i", "--ignore-environment", "-0", "--null", "-v", "--debug", "-"}),
    "time": frozenset({"-p", "--portability", "-a", "--append", "-v", "--verbose", "-q", "--quiet"}),
    "command": frozenset({"-p"}),
    "builtin": frozenset(),
    "noglob": frozenset(),
    "nohup": frozenset(),
    "exec": frozenset({"-c", "-l"}),
    "setsid": frozenset({"-c", "--ctty", "-f", "--fork", "-w", "--wait"}),
    "coproc": frozenset(),
    "busybox": frozenset(),
}
# options with an optional value that is only ever attached (``--eof=x``, ``-i{}``, ``-l2``)
_ATTACHED_OPTIONAL = {
    "xargs": ("-e", "-i", "-l", "--replace=", "--eof="),
    "env": ("--default-signal", "--ignore-signal", "--block-signal"),
}

SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "mksh", "fish", "ash", "yash", "tcsh", "csh"})
# options of bash/sh that take the next word as their value
_SHELL_OPTS_WITH_VALUE = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})

# interpreters: inline code (-c/-e...) or text on standard input can run any program
INTERPRETERS: dict[str, frozenset[str]] = {
    "python": frozenset({"-c"}),
    "python2": frozenset({"-c"}),
    "python3": frozenset({"-c"}),
    "pypy": frozenset({"-c"}),
    "pypy3": frozenset({"-c"}),
    "perl": frozenset({"-e", "-E"}),
    "ruby": frozenset({"-e"}),
    "node": frozenset({"-e", "--eval", "-p", "--print"}),
    "nodejs": frozenset({"-e", "--eval", "-p", "--print"}),
    "php": frozenset({"-r"}),
    "lua": frozenset({"-e"}),
    "tclsh": frozenset(),
    "Rscript": frozenset({"-e"}),
    "osascript": frozenset({"-e"}),
    "pwsh": frozenset({"-c", "-Command", "-command"}),
}

# programs that run a command named in their arguments, with options keel does not model
RUNNERS = frozenset(
    {
        "nohup", "setsid", "uvx", "npx", "bunx", "pnpx", "flock", "ionice", "taskset", "chrt", "watch",
        "strace", "ltrace", "unbuffer", "script", "su", "runuser", "firejail", "chroot", "unshare", "nsenter",
        "sg", "systemd-run", "dbus-run-session", "xvfb-run", "parallel", "pkexec", "fakeroot", "proot",
        "torsocks", "proxychains", "proxychains4", "busybox", "toybox", "catchsegv", "valgrind", "faketime",
        "tini", "dumb-init", "gosu", "su-exec", "chpst", "setpriv", "prlimit", "numactl", "caffeinate",
        "time", "nice", "timeout", "stdbuf", "env", "xargs", "sudo", "doas", "exec", "command", "builtin",
        "coproc", "ssh", "cgexec", "daemonize", "start-stop-daemon", "entr", "inotifywait", "rlwrap",
        "with-contenv", "s6-setuidgid", "bwrap", "nix-shell", "direnv", "dotenv", "op", "aws-vault", "doppler",
        "infisical", "foreman", "honcho", "sem", "ts", "tsp", "at", "batch", "flatpak-spawn", "distrobox-enter",
    }
)  # fmt: skip
# two-word runners: ``uv run CMD``, ``npm exec CMD``...
RUNNER_SUBCOMMANDS = frozenset(
    {
        ("uv", "run"), ("uv", "tool"), ("npm", "exec"), ("npm", "x"), ("pnpm", "exec"), ("pnpm", "dlx"),
        ("pnpm", "x"), ("yarn", "exec"), ("yarn", "dlx"), ("yarn", "run"), ("bun", "x"), ("bun", "run"),
        ("bun", "exec"), ("poetry", "run"), ("pipenv", "run"), ("pdm", "run"), ("hatch", "run"),
        ("conda", "run"), ("mamba", "run"), ("micromamba", "run"), ("pixi", "run"), ("pixi", "exec"),
        ("rye", "run"), ("bundle", "exec"), ("pipx", "run"), ("mise", "exec"), ("mise", "x"), ("asdf", "exec"),
        ("rbenv", "exec"), ("pyenv", "exec"), ("nvm", "exec"), ("volta", "run"), ("fnm", "exec"),
        ("nix", "run"), ("nix", "shell"), ("nix", "develop"), ("devbox", "run"), ("docker", "exec"),
        ("podman", "exec"), ("kubectl", "exec"), ("deno", "run"), ("deno", "eval"), ("dotnet", "exec"),
        ("gem", "exec"), ("git", "submodule"), ("tmux", "new-session"), ("tmux", "send-keys"),
        ("screen", "-dm"), ("cargo", "exec"), ("go", "run"), ("uv", "pip"),
    }
)  # fmt: skip


def skip_options(args: list[str], with_value: frozenset[str]) -> list[str]:
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return args[i + 1 :]
        if not a.startswith("-") or a == "-":
            break
        if a in with_value:
            i += 2
            continue
        i += 1
    return args[i:]


def unknown_option(name: str, args: list[str]) -> str | None:
    """The first option of wrapper ``name`` (before the command it runs) keel does not model, if any."""
    with_value = WRAPPER_OPTS_WITH_VALUE.get(name, frozenset())
    flags = WRAPPER_FLAGS.get(name, frozenset())
    attached = _ATTACHED_OPTIONAL.get(name, ())
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--" or not a.startswith("-") or (a == "-" and name != "env"):
            return None
        if DYNAMIC in a:
            return a
        if a in with_value:
            i += 2
            continue
        if a in flags or (attached and a.startswith(attached)):
            i += 1
            continue
        if a.startswith("--") and a.split("=", 1)[0] in with_value and "=" in a:
            i += 1
            continue
        if not a.startswith("--") and a[:2] in with_value:  # an attached value: -n1, -I{}, -oL
            i += 1
            continue
        if name == "nice" and a[1:].isdigit():
            i += 1
            continue
        if not a.startswith("--") and len(a) > 2 and all(f"-{c}" in flags for c in a[1:]):
            i += 1  # a cluster of flags: -0r
            continue
        return a
    return None


def shell_c(args: list[str]) -> str | None:
    """The script of ``bash [-opts] -c [-opts] [--] SCRIPT``; None when it runs a file or stdin.

    With ``-c`` anywhere among the options, the script is the first word after them (``bash -c
    -- 'cmd'`` and ``bash -ec 'cmd'`` both run ``cmd``); DYNAMIC when there is none or it is unknown."""
    has_c = False
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--" or a == "-":
            i += 1
            break
        if a in _SHELL_OPTS_WITH_VALUE:
            i += 2
            continue
        if a.startswith("--"):
            i += 1
            continue
        if a.startswith(("-", "+")) and len(a) > 1:
            if "c" in a[1:]:
                has_c = True
            i += 1
            continue
        break
    if not has_c:
        return None
    return args[i] if i < len(args) else DYNAMIC


def interpreter_code(name: str, args: list[str]) -> str | None:
    """Where this interpreter takes its program from when keel cannot read it: "stdin" (text
    piped or redirected into it), "inline" (``-c``/``-e`` code), or None (a script file, a module)."""
    inline = INTERPRETERS.get(name)
    if inline is None:
        return None
    for a in args:
        if a == "-" or DYNAMIC in a:
            return "stdin"
        if a in inline:
            return "inline"
        if a.startswith("-") and not a.startswith("--") and any(o[1:] in a[1:] for o in inline if len(o) == 2):
            return "inline"  # -Ic, -ne, -c'code': clusters and attached code
        if a == "-m" or not a.startswith("-"):
            return None  # a module or a script file: runs that, not text keel was given
    return "stdin"  # no script: the program comes from standard input
