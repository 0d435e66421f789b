# -*- coding: utf-8 -*-
# Copyright: gpufabric developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Emulated bootloader tools of the simulated node: update-grub, grub-mkconfig, grub2-mkconfig, grubby.

The node's root comes from ``GPUFABRIC_SYSROOT``; nothing outside it is written (apart from a
scratch directory below the host's temporary directory while the GRUB defaults are sourced with
``/bin/sh``, as grub-mkconfig does).

* ``update-grub`` = ``grub-mkconfig -o /boot/grub/grub.cfg``.  ``grub-mkconfig`` sources
  ``/etc/default/grub`` then ``/etc/default/grub.d/*.cfg`` with a real ``/bin/sh`` and writes a
  Debian-style grub.cfg: one top-level entry for the newest ``/boot/vmlinuz-*`` (the running
  release from ``/proc/sys/kernel/osrelease`` when there is none) with
  ``linux /boot/vmlinuz-<kver> root=<dev> ro <GRUB_CMDLINE_LINUX> <GRUB_CMDLINE_LINUX_DEFAULT>``,
  then "Advanced options" with normal and recovery entries per kernel.  Messages go to stderr
  like grub's.  The defaults see the node, not the host: ``lsb_release`` and the release files
  (``/etc/os-release``, ``/etc/system-release``, ...) they consult are the node's, so
  GRUB_DISTRIBUTOR and the menu titles ("Ubuntu", "Debian GNU/Linux") are the node's.
  ``generate_grub_cfg(root)`` returns that text (the tree builder writes a fresh node's grub.cfg
  with it).
* ``grubby`` manages Boot Loader Spec entries ``/boot/loader/entries/*.conf`` like grubby-bls:
  ``--info=ALL|DEFAULT|<kernel>|<index>``, ``--update-kernel=ALL|DEFAULT|<kernel>|<index>``
  with ``--args`` / ``--remove-args``, ``--default-kernel``, ``--default-index``.  Argument
  edits follow grubby-bls: ``--remove-args key=value`` removes that exact word, ``--remove-args key``
  the key in any form; each ``--args`` word first drops an existing word with the same key;
  each removal hits the first match only.
* ``next_boot_cmdline(root)`` is what ``/proc/cmdline`` shows after a reboot: the default BLS
  entry when there are BLS entries, else the default entry of grub.cfg.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shutil
import subprocess
import sys
import tempfile

SYSROOT_ENV = "GPUFABRIC_SYSROOT"
DEFAULT_ROOT_DEV = "UUID=3f1a2c9e-5b7d-4e21-9a0c-6d8e2f4b1c70"
TOOLS = ("update-grub", "grub-mkconfig", "grub2-mkconfig", "grubby")


# --------------------------------------------------------------------------- helpers

def _root():
    root = os.environ.get(SYSROOT_ENV)
    if not root:
        raise SystemExit("grub emulator: %s is not set; refusing to touch the real /boot" % SYSROOT_ENV)
    return os.path.abspath(root)


def _p(root, path):
    return os.path.join(root, path.lstrip("/"))


def _read(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except (IOError, OSError):
        return default


def _write_atomic(path, text, mode=None):
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        os.makedirs(d)
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    if mode is not None:
        os.chmod(tmp, mode)
    os.rename(tmp, path)


def grub_cfg_mode(text):
    """grub-mkconfig makes its output read-only (0444) unless it holds a password."""
    return 0o600 if re.search(r"^\s*password", text, re.M) else 0o444


def _version_key(v):
    return [(0, int(x), "") if x.isdigit() else (1, 0, x) for x in re.split(r"[.\-_+~]", v)]


def grub_words(text):
    """Split a GRUB script line into words: quotes removed, backslash escapes, ';' ends the command."""
    words, cur, quote, has = [], [], None, False
    i = 0
    while i < len(text):
        c = text[i]
        if quote == "'":
            if c == "'":
                quote = None
            else:
                cur.append(c)
        elif quote == '"':
            if c == '"':
                quote = None
            elif c == "\\" and i + 1 < len(text) and text[i + 1] in '"\\$':
                i += 1
                cur.append(text[i])
            else:
                cur.append(c)
        elif c in "'\"":
            quote, has = c, True
        elif c == "\\" and i + 1 < len(text):
            i += 1
            cur.append(text[i])
            has = True
        elif c in " \t":
            if has:
                words.append("".join(cur))
                cur, has = [], False
        elif c in ";\n":
            break
        else:
            cur.append(c)
            has = True
        i += 1
    if has:
        words.append("".join(cur))
    return words


def loader_cmdline(words):
    """grub_create_loader_cmdline(): arguments joined by blanks, those with blanks double-quoted."""
    out = []
    for w in words:
        w = w.replace("\\", "\\\\").replace('"', '\\"')
        out.append('"%s"' % w if re.search(r"\s", w) else w)
    return " ".join(out)


# --------------------------------------------------------------------------- grub-mkconfig

# Files that tell which distribution this is. /etc/default/grub reads them while it is sourced
# (Ubuntu: ``( . /etc/os-release; echo ${NAME:-Ubuntu} )``, RHEL: ``sed ... /etc/system-release``):
# in the copies the emulator sources they name the node's files, not the host's.
RELEASE_FILES = ("/etc/os-release", "/usr/lib/os-release", "/etc/lsb-release", "/etc/system-release",
                 "/etc/redhat-release", "/etc/debian_version")
_RELEASE_RE = re.compile(r"(?<![\w./-])(%s)(?![\w.-])" % "|".join(re.escape(f) for f in RELEASE_FILES))

# ``lsb_release`` (Debian's /etc/default/grub runs ``lsb_release -i -s``) answering from the node's
# os-release: distributor ID = ID with its first letter upper-cased, or NAME when it only differs
# from ID in case; -d PRETTY_NAME, -r VERSION_ID, -c VERSION_CODENAME; -s prints the bare values.
LSB_RELEASE = r"""#!/bin/sh
# lsb_release of a gpufabric-sim node, written by the grub emulator for one grub-mkconfig run
f="%(root)s/etc/os-release"
[ -f "$f" ] || f="%(root)s/usr/lib/os-release"
ID=; NAME=; PRETTY_NAME=; VERSION_ID=; VERSION_CODENAME=
[ -f "$f" ] && . "$f"
short=n; i=n; d=n; r=n; c=n
for arg in "$@"; do
    case "$arg" in
        --short) short=y ;;
        --id) i=y ;;
        --description) d=y ;;
        --release) r=y ;;
        --codename) c=y ;;
        --all) i=y; d=y; r=y; c=y ;;
        --*) ;;
        -*)
            rest=${arg#-}
            while [ -n "$rest" ]; do
                ch=${rest%%"${rest#?}"}
                rest=${rest#?}
                case "$ch" in
                    s) short=y ;;
                    i) i=y ;;
                    d) d=y ;;
                    r) r=y ;;
                    c) c=y ;;
                    a) i=y; d=y; r=y; c=y ;;
                esac
            done ;;
    esac
done
first=$(printf '%%s' "$ID" | cut -c1 | tr '[:lower:]' '[:upper:]')
dist="$first$(printf '%%s' "$ID" | cut -c2-)"
lower() { printf '%%s' "$1" | tr '[:upper:]' '[:lower:]'; }
if [ -n "$NAME" ] && [ "$(lower "$NAME")" = "$(lower "$ID")" ]; then
    dist="$NAME"
fi
show() {
    if [ "$short" = y ]; then printf '%%s\n' "${2:-n/a}"; else printf '%%s:\t%%s\n' "$1" "${2:-n/a}"; fi
}
[ "$i" = y ] && show "Distributor ID" "$dist"
[ "$d" = y ] && show "Description" "$PRETTY_NAME"
[ "$r" = y ] && show "Release" "$VERSION_ID"
[ "$c" = y ] && show "Codename" "$VERSION_CODENAME"
exit 0
"""

DEFAULT_NAMES = ("GRUB_DEFAULT", "GRUB_DISTRIBUTOR", "GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT",
                 "GRUB_DISABLE_RECOVERY", "GRUB_TIMEOUT", "GRUB_DISABLE_SUBMENU")


def _node_view(text, node):
    """A defaults file's text with the release files it reads pointing below ``node`` (a path)."""
    return _RELEASE_RE.sub(lambda m: node + m.group(1), text)


def source_defaults(root):
    """Source /etc/default/grub and grub.d/*.cfg with /bin/sh like grub-mkconfig; returns the GRUB_* vars.

    The shell runs with the node's view of what the defaults ask about the system: an ``lsb_release``
    that reads the node's os-release comes first in PATH, and the release files the defaults read are
    the node's (see RELEASE_FILES). The copies live in a scratch directory outside the node.
    """
    script = (
        'sysconfdir="$1"; '
        'if test -f "${sysconfdir}/default/grub"; then . "${sysconfdir}/default/grub" || exit 1; fi; '
        'for x in "${sysconfdir}"/default/grub.d/*.cfg; do '
        'if [ -e "${x}" ]; then . "${x}" || exit 1; fi; done; '
        + " ".join('printf "%%s\\0" "$%s";' % n for n in DEFAULT_NAMES))
    scratch = tempfile.mkdtemp(prefix="gpufabric-grub-")
    try:
        node = os.path.join(scratch, "node")
        os.symlink(root, node)
        etc = os.path.join(scratch, "etc")
        os.makedirs(os.path.join(etc, "default", "grub.d"))
        bindir = os.path.join(scratch, "bin")
        os.mkdir(bindir)
        with open(os.path.join(bindir, "lsb_release"), "w") as f:
            f.write(LSB_RELEASE % {"root": node})
        os.chmod(os.path.join(bindir, "lsb_release"), 0o755)
        sources = [("/etc/default/grub", _p(root, "/etc/default/grub"))]
        d = _p(root, "/etc/default/grub.d")
        for n in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            sources.append(("/etc/default/grub.d/" + n, os.path.join(d, n)))
        for rel, src in sources:
            if os.path.isfile(src):
                with open(src) as f:
                    text = f.read()
                with open(os.path.join(scratch, rel.lstrip("/")), "w") as f:
                    f.write(_node_view(text, node))
        env = {"PATH": bindir + ":/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
        proc = subprocess.Popen(["/bin/sh", "-c", script, "sh", etc], env=env, cwd="/",
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out, err = proc.communicate()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if proc.returncode != 0:
        msg = err.decode("utf-8", "replace").replace(etc, "/etc").replace(node, "").strip()
        raise RuntimeError("sourcing /etc/default/grub failed: %s" % msg)
    values = out.decode("utf-8", "replace").split("\0")
    return dict(zip(DEFAULT_NAMES, values))


def _kernels(root):
    boot = _p(root, "/boot")
    kvers = []
    for n in (os.listdir(boot) if os.path.isdir(boot) else []):
        if n.startswith("vmlinuz-"):
            kvers.append(n[len("vmlinuz-"):])
    if not kvers:
        rel = (_read(_p(root, "/proc/sys/kernel/osrelease"), "") or "").strip()
        if rel:
            kvers = [rel]
    return sorted(kvers, key=_version_key, reverse=True)


def _root_device(root):
    for line in (_read(_p(root, "/etc/fstab"), "") or "").splitlines():
        f = line.split()
        if len(f) >= 2 and not f[0].startswith("#") and f[1] == "/":
            return f[0]
    for w in (_read(_p(root, "/proc/cmdline"), "") or "").split():
        if w.startswith("root="):
            return w[len("root="):]
    return DEFAULT_ROOT_DEV


def menu_os(distributor):
    """(OS, --class options) of 10_linux's menu entries for GRUB_DISTRIBUTOR: "GNU/Linux" without one,
    the bare name for Ubuntu and Kubuntu (Ubuntu's 10_linux), else "<name> GNU/Linux"."""
    dist = distributor.strip()
    classes = "--class gnu-linux --class gnu --class os "
    if not dist:
        return "GNU/Linux", classes
    first = re.sub(r"[^A-Za-z0-9_]", "_", dist.split()[0].lower())
    return (dist if dist in ("Ubuntu", "Kubuntu") else "%s GNU/Linux" % dist), "--class %s %s" % (first, classes)


def render_grub_cfg(root, values, kvers):
    dist_os, classes = menu_os(values.get("GRUB_DISTRIBUTOR", ""))
    rootdev = _root_device(root)
    linux_args = values.get("GRUB_CMDLINE_LINUX", "")
    default_args = values.get("GRUB_CMDLINE_LINUX_DEFAULT", "")
    default = values.get("GRUB_DEFAULT") or "0"
    lines = [
        "#",
        "# DO NOT EDIT THIS FILE",
        "#",
        "# It is automatically generated by grub-mkconfig using templates",
        "# from /etc/grub.d and settings from /etc/default/grub",
        "#",
        "",
        "### BEGIN /etc/grub.d/00_header ###",
        'set default="%s"' % default,
        "set timeout=%s" % (values.get("GRUB_TIMEOUT") or "5"),
        "### END /etc/grub.d/00_header ###",
        "",
        "### BEGIN /etc/grub.d/10_linux ###",
    ]

    def entry(title, kver, args, indent):
        pad = "\t" * indent
        return [
            "%smenuentry '%s' %s$menuentry_id_option "
            "'gnulinux-%s-advanced' {" % (pad, title, classes, kver),
            "%s\tload_video" % pad,
            "%s\tinsmod gzio" % pad,
            "%s\techo\t'Loading Linux %s ...'" % (pad, kver),
            "%s\tlinux\t/boot/vmlinuz-%s root=%s ro %s" % (pad, kver, rootdev, args),
            "%s\techo\t'Loading initial ramdisk ...'" % pad,
            "%s\tinitrd\t/boot/initrd.img-%s" % (pad, kver),
            "%s}" % pad,
        ]

    both = ("%s %s" % (linux_args, default_args)).rstrip()
    lines += entry(dist_os, kvers[0], both, 0)
    lines.append("submenu 'Advanced options for %s' $menuentry_id_option 'gnulinux-advanced' {" % dist_os)
    for k in kvers:
        lines += entry("%s, with Linux %s" % (dist_os, k), k, both, 1)
        if values.get("GRUB_DISABLE_RECOVERY") != "true":
            lines += entry("%s, with Linux %s (recovery mode)" % (dist_os, k), k,
                           ("single %s" % linux_args).rstrip(), 1)
    lines += ["}", "", "### END /etc/grub.d/10_linux ###", ""]
    return "\n".join(lines)


def grub_mkconfig(argv, prog):
    out_file = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-o" and i + 1 < len(argv):
            out_file = argv[i + 1]
            i += 2
            continue
        if a.startswith("--output="):
            out_file = a.split("=", 1)[1]
        elif a in ("-h", "--help"):
            sys.stdout.write("Usage: %s [OPTION]\nGenerate a grub config file\n\n"
                             "  -o, --output=FILE       output generated config to FILE [default=stdout]\n" % prog)
            return 0
        else:
            sys.stderr.write("%s: unrecognized option '%s'\nTry '%s --help' for more information.\n"
                             % (prog, a, prog))
            return 1
        i += 1
    root = _root()
    try:
        values = source_defaults(root)
    except RuntimeError as e:
        sys.stderr.write("%s: %s\n" % (prog, e))
        return 1
    kvers = _kernels(root)
    sys.stderr.write("Generating grub configuration file ...\n")
    for k in kvers:
        sys.stderr.write("Found linux image: /boot/vmlinuz-%s\n" % k)
        if os.path.exists(_p(root, "/boot/initrd.img-%s" % k)):
            sys.stderr.write("Found initrd image: /boot/initrd.img-%s\n" % k)
    if not kvers:
        sys.stderr.write("%s: no kernel image found below /boot\n" % prog)
        return 1
    text = render_grub_cfg(root, values, kvers)
    sys.stderr.write("Warning: os-prober will not be executed to detect other bootable partitions.\n"
                     "Systems on them will not be added to the GRUB boot configuration.\n"
                     "Check GRUB_DISABLE_OS_PROBER documentation entry.\n")
    if out_file:
        _write_atomic(_p(root, out_file), text, grub_cfg_mode(text))
    else:
        sys.stdout.write(text)
    sys.stderr.write("done\n")
    return 0


def generate_grub_cfg(root):
    """The grub.cfg ``grub-mkconfig`` writes for the node now (RuntimeError when it would fail)."""
    values = source_defaults(root)
    kvers = _kernels(root)
    if not kvers:
        raise RuntimeError("no kernel image found below /boot")
    return render_grub_cfg(root, values, kvers)


def update_grub(argv):
    return grub_mkconfig(["-o", "/boot/grub/grub.cfg"] + list(argv), "grub-mkconfig")


def grub_cfg_default_args(text):
    """Words of the linux line of grub.cfg's default top-level entry (GRUB_DEFAULT=N only)."""
    m = re.search(r'^set default="?([^"\n]*)"?', text, re.M)
    want = int(m.group(1)) if m and m.group(1).isdigit() else 0
    depth = 0
    index = -1
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("menuentry ") or s.startswith("submenu "):
            if depth == 0:
                index += 1
            depth += 1
            continue
        if s == "}":
            depth -= 1
            continue
        if depth == 1 and index == want and s.startswith("linux"):
            return grub_words(s)[1:]
    return None


# --------------------------------------------------------------------------- grubby (BLS)

def _grubenv(root):
    env = {}
    for d in ("/boot/grub2/grubenv", "/boot/efi/EFI/redhat/grubenv"):
        text = _read(_p(root, d))
        if text is None:
            continue
        for line in text.splitlines():
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                env[k] = v
        break
    return env


def _bls_dir(root):
    return _p(root, "/boot/loader/entries")


def bls_entries(root):
    """BLS entries sorted like grubby-bls (newest version first): list of dicts."""
    d = _bls_dir(root)
    out = []
    for n in (os.listdir(d) if os.path.isdir(d) else []):
        if not n.endswith(".conf"):
            continue
        path = os.path.join(d, n)
        ent = {"file": path, "id": n[:-len(".conf")], "lines": []}
        for line in (_read(path, "") or "").splitlines():
            ent["lines"].append(line)
            parts = line.split(None, 1)
            if len(parts) == 2 and parts[0] not in ent:
                ent[parts[0]] = parts[1].strip()
        out.append(ent)
    out.sort(key=lambda e: _version_key(e.get("version", e["id"])), reverse=True)
    return out


def _default_index(root, ents):
    saved = _grubenv(root).get("saved_entry")
    for i, e in enumerate(ents):
        if saved and e["id"] == saved:
            return i
    return 0


def _kernel_path(ent):
    linux = ent.get("linux", "")
    return linux if linux.startswith("/boot/") else "/boot" + linux


def _split_options(options):
    words = options.split()
    root = None
    rest = []
    for w in words:
        if w.startswith("root=") and root is None:
            root = w[len("root="):]
        else:
            rest.append(w)
    return root, rest


def _print_info(i, ent):
    root, rest = _split_options(ent.get("options", ""))
    sys.stdout.write("index=%d\n" % i)
    sys.stdout.write('kernel="%s"\n' % _kernel_path(ent))
    sys.stdout.write('args="%s"\n' % " ".join(rest))
    if root is not None:
        sys.stdout.write('root="%s"\n' % root)
    if "initrd" in ent:
        initrd = ent["initrd"]
        sys.stdout.write('initrd="%s"\n' % (initrd if initrd.startswith("/boot/") else "/boot" + initrd))
    if "title" in ent:
        sys.stdout.write('title="%s"\n' % ent["title"])
    sys.stdout.write('id="%s"\n' % ent["id"])


def _select(root, ents, which):
    if which == "ALL":
        return list(range(len(ents)))
    if which == "DEFAULT":
        return [_default_index(root, ents)] if ents else []
    if which.isdigit():
        i = int(which)
        return [i] if i < len(ents) else None
    hits = [i for i, e in enumerate(ents) if _kernel_path(e) == which or e.get("linux") == which]
    return hits or None


def _key(word):
    return word.split("=", 1)[0]


def edit_args(words, remove, add):
    """grubby-bls update_args(): first-match removals, then add words replacing their key once."""
    words = list(words)
    for r in remove:
        for i, w in enumerate(words):
            if (w == r) if "=" in r else (_key(w) == r):
                del words[i]
                break
    for a in add:
        k = _key(a)
        for i, w in enumerate(words):
            if _key(w) == k:
                del words[i]
                break
    return words + list(add)


def _rewrite_options(ent, new_options):
    out = []
    done = False
    for line in ent["lines"]:
        parts = line.split(None, 1)
        if parts and parts[0] == "options" and not done:
            out.append("options %s" % new_options)
            done = True
        else:
            out.append(line)
    if not done:
        out.append("options %s" % new_options)
    _write_atomic(ent["file"], "\n".join(out) + "\n")


def grubby(argv):
    root = _root()
    opts = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--info", "--update-kernel", "--args", "--remove-args") and i + 1 < len(argv):
            opts[a[2:]] = argv[i + 1]
            i += 2
            continue
        if "=" in a and a.split("=", 1)[0] in ("--info", "--update-kernel", "--args", "--remove-args"):
            k, v = a.split("=", 1)
            opts[k[2:]] = v
        elif a in ("--default-kernel", "--default-index", "--default-title"):
            opts[a[2:]] = True
        else:
            sys.stderr.write("grubby: bad argument %s: unknown option\n" % a)
            return 1
        i += 1
    ents = bls_entries(root)
    if "default-kernel" in opts or "default-index" in opts or "default-title" in opts:
        if not ents:
            return 1
        d = _default_index(root, ents)
        if "default-kernel" in opts:
            sys.stdout.write("%s\n" % _kernel_path(ents[d]))
        elif "default-index" in opts:
            sys.stdout.write("%d\n" % d)
        else:
            sys.stdout.write("%s\n" % ents[d].get("title", ""))
        return 0
    if "info" in opts:
        sel = _select(root, ents, opts["info"])
        if not sel:
            sys.stderr.write("The param %s is incorrect\n" % opts["info"])
            return 1
        for idx in sel:
            _print_info(idx, ents[idx])
        return 0
    if "update-kernel" in opts:
        sel = _select(root, ents, opts["update-kernel"])
        if not sel:
            sys.stderr.write("The param %s is incorrect\n" % opts["update-kernel"])
            return 1
        add = (opts.get("args") or "").split()
        remove = (opts.get("remove-args") or "").split()
        for idx in sel:
            ent = ents[idx]
            _rewrite_options(ent, " ".join(edit_args(ent.get("options", "").split(), remove, add)))
        return 0
    sys.stderr.write("grubby: no action specified\n")
    return 1


# --------------------------------------------------------------------------- next boot

def _expand(words, env):
    out = []
    for w in words:
        w = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", lambda m: env.get(m.group(1), ""), w)
        if w:
            out.extend(w.split())
    return out


def next_boot_cmdline(root):
    """The /proc/cmdline the simulated node gets at its next boot ('' when nothing is bootable)."""
    ents = bls_entries(root)
    if ents:
        ent = ents[_default_index(root, ents)]
        words = _expand(ent.get("options", "").split(), _grubenv(root))
        return loader_cmdline(["BOOT_IMAGE=(hd0,gpt2)%s" % ent.get("linux", "")] + words)
    for cfg in ("/boot/grub/grub.cfg", "/boot/grub2/grub.cfg"):
        text = _read(_p(root, cfg))
        if text is None:
            continue
        words = grub_cfg_default_args(text)
        if not words:
            continue
        return loader_cmdline(["BOOT_IMAGE=%s" % words[0]] + words[1:])
    return ""


def main(argv=None):
    argv = list(sys.argv if argv is None else argv)
    prog = os.path.basename(argv[0]) if argv else ""
    args = argv[1:]
    if prog not in TOOLS and args and args[0] in TOOLS:
        prog, args = args[0], args[1:]
    if prog == "update-grub":
        return update_grub(args)
    if prog in ("grub-mkconfig", "grub2-mkconfig"):
        return grub_mkconfig(args, prog)
    if prog == "grubby":
        return grubby(args)
    sys.stderr.write("grub emulator: unknown tool %r (expected one of %s)\n" % (prog, ", ".join(TOOLS)))
    return 2


if __name__ == "__main__":
    sys.exit(main())
